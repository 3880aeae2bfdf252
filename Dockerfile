# syntax=docker/dockerfile:1
# gpuaudit in a container. The binary is built by scripts/release.sh, the same build as the
# release tarballs and wheels (glibc 2.17+, zig as the linker), and copied into a small runtime
# image; NVML and libcuda come from the host driver through the NVIDIA container toolkit.
#
#   docker build -t gpuaudit .
#   docker buildx build --platform linux/arm64 -t gpuaudit:arm64 .   # cross-built, no emulation
#   docker run --rm --gpus all gpuaudit --facts-only
#
# The default runtime image has no cuBLAS and no NCCL (the GEMM and all-reduce measurements say
# so and skip); an NVIDIA CUDA runtime image has both:
#   docker build --build-arg RUNTIME_IMAGE=nvidia/cuda:12.4.1-runtime-ubuntu22.04 -t gpuaudit:cuda .
# README.md (Install, "Container") lists the read-only mounts the host checks need and what a
# container cannot see.

ARG RUNTIME_IMAGE=debian:12-slim

# The build runs on the builder's own architecture and cross-compiles for the image's.
FROM --platform=$BUILDPLATFORM rust:1-bookworm AS build
ARG TARGETARCH
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3 python3-venv \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
RUN arch="${TARGETARCH:-$(dpkg --print-architecture)}" \
 && case "$arch" in \
      amd64) target=x86_64-unknown-linux-gnu ;; \
      arm64) target=aarch64-unknown-linux-gnu ;; \
      *) echo "gpuaudit is built for amd64 and arm64, not $arch" >&2; exit 1 ;; \
    esac \
 && CARGO_TARGET_DIR=/build DIST=/dist scripts/release.sh "$target" \
 && mkdir /out && cp /dist/gpuaudit-*-"$target"/gpuaudit /out/gpuaudit

FROM ${RUNTIME_IMAGE}
COPY --from=build /out/gpuaudit /usr/local/bin/gpuaudit
COPY LICENSE-MIT LICENSE-APACHE README.md /usr/share/doc/gpuaudit/
# What the NVIDIA container toolkit reads: every GPU, and the driver's compute (libcuda) and
# utility (NVML, nvidia-smi) libraries mounted in.
ENV NVIDIA_VISIBLE_DEVICES=all \
    NVIDIA_DRIVER_CAPABILITIES=compute,utility
ENTRYPOINT ["gpuaudit"]

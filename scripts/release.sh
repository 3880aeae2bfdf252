#!/usr/bin/env bash
# The release build: for each target, a wheel that carries the binary (pip install gpuaudit) and
# a tarball with the same binary, both built for glibc 2.17 and later.
#
#   scripts/release.sh [TARGET...]     default: x86_64-unknown-linux-gnu aarch64-unknown-linux-gnu
#
# One build per target: maturin (bindings = "bin", pyproject.toml) compiles the gpuaudit crate
# with zig as the linker against glibc 2.17's symbol versions (--zig --compatibility
# manylinux2014) and refuses to tag a wheel manylinux2014 when the binary needs anything newer.
# The tarball's binary is taken out of the wheel, so what pip installs and what the tarball holds
# are the same bytes. The binary is linked dynamically against glibc: NVML, CUDA, cuBLAS and NCCL
# are loaded at run time and need glibc (a static musl binary could not load them).
#
# Output, in $DIST (default ${CARGO_TARGET_DIR:-target}/dist):
#   gpuaudit-VERSION-py3-none-manylinux2014_ARCH.manylinux_2_17_ARCH.whl
#   gpuaudit-VERSION-TARGET/gpuaudit (+ README.md, licences) and gpuaudit-VERSION-TARGET.tar.gz
#   SHA256SUMS
#
# Tools: cargo and the Rust target (added with rustup where missing); maturin and ziglang from
# PyPI, pinned below, installed into the virtual environment $RELEASE_VENV (default
# ${CARGO_TARGET_DIR:-target}/release-tools) when it does not have them yet.
set -euo pipefail
cd "$(dirname "$0")/.."

MATURIN_VERSION=${MATURIN_VERSION:-1.16.0}
ZIGLANG_VERSION=${ZIGLANG_VERSION:-0.17.1}
TARGET_DIR=${CARGO_TARGET_DIR:-target}
DIST=${DIST:-$TARGET_DIR/dist}
RELEASE_VENV=${RELEASE_VENV:-$TARGET_DIR/release-tools}
PYTHON=${PYTHON:-python3}
if [ $# -gt 0 ]; then
  TARGETS=("$@")
else
  TARGETS=(x86_64-unknown-linux-gnu aarch64-unknown-linux-gnu)
fi
say() { echo "== release: $*" >&2; }

for t in "${TARGETS[@]}"; do
  case "$t" in
    x86_64-unknown-linux-gnu | aarch64-unknown-linux-gnu) ;;
    *) echo "release.sh: unsupported target '$t' (x86_64-unknown-linux-gnu or aarch64-unknown-linux-gnu)" >&2; exit 2 ;;
  esac
done

# Tools, pinned, so that a release does not change with what PyPI has that day.
if [ "$("$RELEASE_VENV/bin/maturin" --version 2>/dev/null)" != "maturin $MATURIN_VERSION" ] ||
  [ "$("$RELEASE_VENV/bin/python" -m ziglang version 2>/dev/null)" != "$ZIGLANG_VERSION" ]; then
  say "installing maturin $MATURIN_VERSION and ziglang $ZIGLANG_VERSION into $RELEASE_VENV"
  "$PYTHON" -m venv "$RELEASE_VENV"
  "$RELEASE_VENV/bin/python" -m pip install --quiet "maturin==$MATURIN_VERSION" "ziglang==$ZIGLANG_VERSION"
fi
# maturin runs zig as `python3 -m ziglang` when no zig is on PATH: the venv's python3 comes first.
PATH="$(cd "$RELEASE_VENV/bin" && pwd):$PATH"
export PATH
if command -v rustup >/dev/null 2>&1; then
  installed=$(rustup target list --installed)
  for t in "${TARGETS[@]}"; do
    grep -qx "$t" <<<"$installed" || { say "rustup target add $t"; rustup target add "$t"; }
  done
fi

VERSION=$(cargo metadata --format-version 1 --no-deps --locked |
  "$PYTHON" -c 'import json, sys; print(next(p["version"] for p in json.load(sys.stdin)["packages"] if p["name"] == "gpuaudit"))')
# Tarball entries get the commit's date, so that two builds of one commit give the same tarball.
SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || echo 0)}
export SOURCE_DATE_EPOCH
mkdir -p "$DIST"

for t in "${TARGETS[@]}"; do
  arch=${t%%-*}
  say "building $t (gpuaudit $VERSION, glibc 2.17+)"
  rm -f "$DIST"/gpuaudit-"$VERSION"-*-manylinux*_"$arch".whl
  maturin build --release --locked --zig --target "$t" --compatibility manylinux2014 --out "$DIST"
  wheels=("$DIST"/gpuaudit-"$VERSION"-py3-none-*manylinux2014_"$arch"*.whl)
  [ -f "${wheels[0]}" ] || { echo "release.sh: maturin left no manylinux2014 $arch wheel in $DIST" >&2; exit 1; }
  wheel=${wheels[0]}

  dir="gpuaudit-$VERSION-$t"
  rm -rf "${DIST:?}/$dir"
  mkdir -p "$DIST/$dir"
  "$PYTHON" - "$wheel" "$DIST/$dir/gpuaudit" <<'PY'
import sys, zipfile
wheel, dest = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(wheel) as z:
    names = [n for n in z.namelist() if n.endswith(".data/scripts/gpuaudit")]
    if len(names) != 1:
        sys.exit(f"release.sh: {wheel} holds {len(names)} gpuaudit binaries, expected 1")
    with open(dest, "wb") as out:
        out.write(z.read(names[0]))
PY
  chmod 755 "$DIST/$dir/gpuaudit"
  cp README.md LICENSE-MIT LICENSE-APACHE "$DIST/$dir/"
  tar -C "$DIST" --sort=name --owner=0 --group=0 --numeric-owner --mtime="@$SOURCE_DATE_EPOCH" \
    -cf - "$dir" | gzip -n -9 >"$DIST/$dir.tar.gz"
  say "$DIST/$dir/gpuaudit: $(stat -c %s "$DIST/$dir/gpuaudit") bytes; $(basename "$wheel")"
done

(cd "$DIST" && sha256sum -- gpuaudit-"$VERSION"-*.whl gpuaudit-"$VERSION"-*.tar.gz >SHA256SUMS)
say "done: $DIST"

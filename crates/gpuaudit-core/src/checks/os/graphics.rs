//! os.graphics: what rendering on the GPUs needs: GPUs with graphics engines, the NVIDIA
//! driver's Vulkan and EGL loader files, and, in a container, the graphics capability.

use crate::checks::common::spec_of;
use crate::checks::{Check, CheckDoc, CheckKind, ProfileEffect};
use crate::facts::{Facts, IcdManifest};
use crate::finding::{Finding, Status};
use crate::parse::host::cudaenv::parse_driver_capabilities;
use crate::policy::{Policy, Profile};

const ID: &str = "os.graphics";

/// GPU families built on the compute-only dies (GA100, GH100, GB100 / GB110): no RT cores, no
/// display outputs, no NVENC, and only a token of raster hardware ("these modules do not
/// include display connectors, NVIDIA RT Cores for ray tracing acceleration, or an NVENC
/// encoder since they, like the A100, are data center modules": NVIDIA H100 Tensor Core GPU
/// Architecture whitepaper, 2022; the same holds for the A100, A30 and the Blackwell B-series
/// data-center parts). Renderers that need RT cores (RTX / OptiX ray tracing, Omniverse,
/// Isaac Sim) do not list them; OpenGL and Vulkan run, several times slower than on a
/// graphics GPU of the same price.
pub const COMPUTE_ONLY_FAMILIES: &[&str] = &[
    "A100", "A800", "A30", "H100", "H800", "H20", "H200", "GH200", "B200", "B300", "GB200",
];

/// The NVIDIA container toolkit's capability that mounts the OpenGL / Vulkan / EGL driver
/// libraries and their loader files ("graphics: required for running OpenGL and Vulkan
/// applications": https://docs.nvidia.com/datacenter/cloud-native/container-toolkit/latest/docker-specialized.html).
pub const GRAPHICS_CAPABILITY: &str = "graphics";

pub const CHECK: Check = Check {
    id: ID,
    title: "Graphics readiness: GPUs with graphics engines, the NVIDIA Vulkan and EGL loader files, the container's graphics capability",
    looks_at: "graphics readiness for `--profile render`: GPUs with graphics engines (not a \
               compute-only A100/H100/H200/B200 part), the NVIDIA Vulkan ICD and EGL vendor \
               files, a container's NVIDIA_DRIVER_CAPABILITIES",
    kind: CheckKind::Facts,
    doc: CheckDoc {
        what: "Each GPU's model against the compute-only data-center families (A100, A800, \
               A30, H100, H800, H20, H200, GH200, B200, B300, GB200: no RT cores, no display, \
               no NVENC); the Vulkan ICD manifests (/usr/share/vulkan/icd.d, \
               /usr/local/share/vulkan/icd.d, /etc/vulkan/icd.d) and glvnd's EGL vendor files \
               (/usr/share/glvnd/egl_vendor.d, /etc/glvnd/egl_vendor.d) that point the loaders \
               at the NVIDIA driver; inside a container, whether NVIDIA_DRIVER_CAPABILITIES \
               grants 'graphics'. Judged with --profile render; other profiles do not need \
               graphics and get a skip with what was found.",
        why: "Rendering (Blender, Omniverse, Isaac Sim, Unreal, headless OpenGL through EGL, \
              Vulkan) needs the GPU's graphics engines and the driver's graphics libraries. \
              Without the NVIDIA Vulkan ICD the Vulkan loader finds no NVIDIA device and \
              applications fall back to a software rasterizer (lavapipe/llvmpipe) or stop; \
              without the EGL vendor file, headless OpenGL runs on Mesa's CPU renderer. A \
              container started without the 'graphics' capability gets neither. A compute-only \
              data-center GPU has no RT cores and almost no raster hardware: RTX renderers do \
              not support it.",
        verify: "ls /usr/share/vulkan/icd.d /etc/vulkan/icd.d /usr/share/glvnd/egl_vendor.d\n\
                 vulkaninfo --summary   # the NVIDIA GPU must be listed, not llvmpipe\n\
                 eglinfo -B | grep -i vendor\n\
                 echo $NVIDIA_DRIVER_CAPABILITIES   # in a container: graphics (or all)",
        fix: "Install the driver's OpenGL/Vulkan user-space package of the same version as the \
              kernel module (Ubuntu: libnvidia-gl-<branch>; the .run installer without \
              --no-opengl-files); start containers with -e NVIDIA_DRIVER_CAPABILITIES=all (or \
              graphics,compute,utility,display); for rendering, order a GPU with graphics \
              engines (L40S, L4, A40, A10, RTX 6000 Ada, RTX PRO 6000) instead of an \
              A100/H100/H200/B200.",
    },
    profiles: &[ProfileEffect {
        profile: Profile::Render,
        effect: "Judged: a compute-only data-center GPU, a missing NVIDIA Vulkan ICD or EGL vendor file, and a container without the 'graphics' capability fail; other profiles skip with what was found.",
    }],
    run: run_graphics,
};

fn run_graphics(facts: &Facts, policy: &Policy) -> Vec<Finding> {
    let render = policy.profile == Profile::Render;
    let mut out = Vec::new();

    // The GPUs.
    for g in facts.gpu_list().iter().filter(|g| policy.selects(g.index)) {
        let name = g
            .name
            .value()
            .cloned()
            .unwrap_or_else(|| "unknown model".into());
        let f = match spec_of(g) {
            Some(s) if COMPUTE_ONLY_FAMILIES.contains(&s.family.as_str()) => Finding::new(
                ID,
                if render { Status::Fail } else { Status::Info },
                format!("{}: {name} is a compute-only data-center GPU (no RT cores, no display outputs, no NVENC): renderers that need RT cores do not support it, and OpenGL/Vulkan run on a token of raster hardware", g.label()),
            )
            .fix("for rendering, use GPUs with graphics engines (L40S, L4, A40, A10, RTX 6000 Ada, RTX PRO 6000)"),
            Some(s) => Finding::pass(ID, format!("{}: {name} has graphics engines ({} is not a compute-only part)", g.label(), s.family)),
            None => Finding::skip(ID, format!("{}: {name} is not in the spec database: its graphics engines are unknown", g.label())),
        };
        out.push(f.gpu(g.index));
    }

    // The loader files.
    match facts.host.graphics.get() {
        Err(r) => out.push(Finding::skip(
            ID,
            format!("could not look for the Vulkan and EGL loader files: {r}"),
        )),
        Ok(files) => {
            for (api, list, dirs, cost) in [
                (
                    "Vulkan ICD",
                    &files.vulkan_icds,
                    "/usr/share/vulkan/icd.d, /usr/local/share/vulkan/icd.d, /etc/vulkan/icd.d",
                    "the Vulkan loader finds no NVIDIA device: Vulkan applications fall back to a software rasterizer (lavapipe) or stop",
                ),
                (
                    "EGL vendor file",
                    &files.egl_vendors,
                    "/usr/share/glvnd/egl_vendor.d, /etc/glvnd/egl_vendor.d",
                    "headless OpenGL through EGL runs on Mesa's CPU renderer (llvmpipe) or fails",
                ),
            ] {
                out.push(judge_manifests(api, list, dirs, cost, render));
            }
        }
    }

    // A container's capabilities.
    if let Some(kind) = facts.host.container.inside.value().cloned().flatten() {
        let value = facts
            .host
            .env
            .value()
            .and_then(|e| e.get("NVIDIA_DRIVER_CAPABILITIES"));
        let caps = parse_driver_capabilities(value);
        if !caps.has(GRAPHICS_CAPABILITY) {
            out.push(
                Finding::new(
                    ID,
                    if render { Status::Fail } else { Status::Info },
                    format!(
                        "this {kind} container was started with NVIDIA_DRIVER_CAPABILITIES={}, without 'graphics': the NVIDIA container toolkit mounted none of the driver's OpenGL, Vulkan or EGL libraries",
                        if caps.default { "(unset: utility,compute)".to_string() } else { value.unwrap_or("").to_string() }
                    ),
                )
                .with("granted", &caps.granted)
                .fix("restart the container with -e NVIDIA_DRIVER_CAPABILITIES=all (or graphics,compute,utility,display)"),
            );
        }
    }

    if !render {
        // Nothing here matters to a workload that does not render: say what was found.
        let found: Vec<String> = out
            .iter()
            .filter(|f| f.status != Status::Skip)
            .map(|f| f.message.clone())
            .collect();
        let mut f = Finding::skip(
            ID,
            "graphics readiness is judged with --profile render (this workload does not render)",
        );
        if !found.is_empty() {
            f = f.with("found", &found);
        }
        return vec![f];
    }
    out
}

fn judge_manifests(
    api: &str,
    list: &[IcdManifest],
    dirs: &str,
    cost: &str,
    render: bool,
) -> Finding {
    let nvidia: Vec<&IcdManifest> = list.iter().filter(|m| m.is_nvidia()).collect();
    let broken: Vec<&IcdManifest> = list.iter().filter(|m| m.error.is_some()).collect();
    let shown = |ms: &[&IcdManifest]| {
        ms.iter()
            .map(|m| match (&m.library, &m.error) {
                (Some(l), _) => format!("{} -> {l}", m.path),
                (None, Some(e)) => format!("{}: {e}", m.path),
                (None, None) => m.path.clone(),
            })
            .collect::<Vec<_>>()
    };
    let all: Vec<&IcdManifest> = list.iter().collect();
    if let Some(first) = nvidia.first() {
        return Finding::pass(
            ID,
            format!(
                "the NVIDIA {api} is there: {} -> {}",
                first.path,
                first.library.as_deref().unwrap_or("?")
            ),
        )
        .with("files", shown(&all));
    }
    let mut msg = format!("no NVIDIA {api} in {dirs}: {cost}");
    if !broken.is_empty() {
        msg.push_str(&format!(
            "; {} the loader skips: {}",
            if broken.len() == 1 { "a file" } else { "files" },
            shown(&broken).join(", ")
        ));
    }
    Finding::new(ID, if render { Status::Fail } else { Status::Info }, msg)
        .with("files", shown(&all))
        .fix("install the driver's OpenGL/Vulkan package of the kernel module's version (Ubuntu: libnvidia-gl-<branch>; the .run installer without --no-opengl-files); in a container, start it with -e NVIDIA_DRIVER_CAPABILITIES=all")
}
/// An H200 is a compute-only data-center GPU: information for other workloads, a failure
/// for rendering.
#[cfg(test)]
pub(crate) fn profile_examples() -> Vec<(Profile, Facts)> {
    vec![(
        Profile::Render,
        crate::testing::Machine::healthy("h200-sxm-141gb", 1).build(),
    )]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::facts::{EnvFacts, GraphicsFiles};
    use crate::reading::Reading;
    use crate::testing::{statuses, Machine};

    fn render() -> Policy {
        Policy {
            profile: Profile::Render,
            ..Policy::default()
        }
    }

    fn manifest(path: &str, lib: &str) -> IcdManifest {
        IcdManifest {
            path: path.into(),
            library: Some(lib.into()),
            error: None,
        }
    }

    fn nvidia_files() -> Reading<GraphicsFiles> {
        Reading::Value(GraphicsFiles {
            vulkan_icds: vec![manifest(
                "/usr/share/vulkan/icd.d/nvidia_icd.json",
                "libGLX_nvidia.so.0",
            )],
            egl_vendors: vec![manifest(
                "/usr/share/glvnd/egl_vendor.d/10_nvidia.json",
                "libEGL_nvidia.so.0",
            )],
        })
    }

    fn machine(key: &str) -> Facts {
        Machine::healthy(key, 1)
            .with(|f| {
                f.host.graphics = nvidia_files();
                f.host.container.inside = Reading::Value(None);
            })
            .build()
    }

    #[test]
    fn a_render_machine_with_the_nvidia_graphics_stack_passes() {
        let f = machine("l40s");
        let r = run_graphics(&f, &render());
        assert_eq!(statuses(&r), vec![Status::Pass; 3], "{r:#?}");
        assert_eq!(r[0].gpu, Some(0));
        assert!(r[1]
            .message
            .contains("nvidia_icd.json -> libGLX_nvidia.so.0"));
    }

    #[test]
    fn a_compute_only_gpu_fails_under_render() {
        for key in ["h200-sxm-141gb", "a100-sxm4-80gb", "h100-sxm5-80gb"] {
            let r = run_graphics(&machine(key), &render());
            assert_eq!(r[0].status, Status::Fail, "{key}");
            assert!(r[0].message.contains("compute-only data-center GPU"));
        }
        // Every listed family is one the spec database has.
        let db = crate::spec::SpecDb::embedded();
        for fam in COMPUTE_ONLY_FAMILIES {
            assert!(db.gpus.iter().any(|g| g.family == *fam), "{fam}");
        }
        // A GPU the database does not know: unknown.
        let f = Machine::healthy("l40s", 1)
            .gpu(0, |g| {
                g.name = Reading::Value("NVIDIA Mystery".into());
                g.pci_device_id = Reading::unavailable("x");
                g.memory.total_mib = Reading::unavailable("x");
                g.sm_count = Reading::unavailable("x");
            })
            .with(|f| f.host.graphics = nvidia_files())
            .build();
        assert_eq!(run_graphics(&f, &render())[0].status, Status::Skip);
    }

    #[test]
    fn missing_or_broken_manifests_fail_under_render() {
        let mut f = machine("l40s");
        f.host.graphics = Reading::Value(GraphicsFiles {
            vulkan_icds: vec![
                manifest(
                    "/usr/share/vulkan/icd.d/lvp_icd.x86_64.json",
                    "libvulkan_lvp.so",
                ),
                IcdManifest {
                    path: "/etc/vulkan/icd.d/nvidia_icd.json".into(),
                    library: None,
                    error: Some("not JSON: EOF".into()),
                },
            ],
            egl_vendors: vec![],
        });
        let r = run_graphics(&f, &render());
        assert_eq!(
            statuses(&r),
            vec![Status::Pass, Status::Fail, Status::Fail],
            "{r:#?}"
        );
        assert!(r[1].message.contains("no NVIDIA Vulkan ICD"));
        assert!(r[1]
            .message
            .contains("a file the loader skips: /etc/vulkan/icd.d/nvidia_icd.json: not JSON: EOF"));
        assert!(r[2].message.contains("no NVIDIA EGL vendor file"));
        f.host.graphics = Reading::unavailable("snapshot without host part");
        let r = run_graphics(&f, &render());
        assert_eq!(statuses(&r), vec![Status::Pass, Status::Skip]);
    }

    #[test]
    fn a_container_without_the_graphics_capability_fails_under_render() {
        let mut f = machine("l40s");
        f.host.container.inside = Reading::Value(Some("docker".into()));
        let with = |v: Option<&str>| EnvFacts {
            vars: v
                .map(|v| vec![("NVIDIA_DRIVER_CAPABILITIES".to_string(), v.to_string())])
                .unwrap_or_default(),
        };
        f.host.env = Reading::Value(with(None));
        let r = run_graphics(&f, &render());
        assert_eq!(r.last().map(|x| x.status), Some(Status::Fail), "{r:#?}");
        assert!(r.last().is_some_and(|x| x
            .message
            .contains("(unset: utility,compute), without 'graphics'")));
        f.host.env = Reading::Value(with(Some("compute,utility")));
        assert!(run_graphics(&f, &render())
            .last()
            .is_some_and(|x| x.message.contains("=compute,utility, without")));
        for ok in ["all", "graphics,compute,utility,display"] {
            f.host.env = Reading::Value(with(Some(ok)));
            assert_eq!(
                statuses(&run_graphics(&f, &render())),
                vec![Status::Pass; 3],
                "{ok}"
            );
        }
    }

    #[test]
    fn other_profiles_skip_with_what_was_found() {
        let mut f = machine("h200-sxm-141gb");
        f.host.graphics = Reading::Value(GraphicsFiles::default());
        for p in [
            Profile::General,
            Profile::Train,
            Profile::Inference,
            Profile::Hpc,
        ] {
            let r = run_graphics(
                &f,
                &Policy {
                    profile: p,
                    ..Policy::default()
                },
            );
            assert_eq!(statuses(&r), vec![Status::Skip], "{p}");
            assert!(r[0].message.contains("--profile render"));
            let found = r[0]
                .evidence
                .get("found")
                .map(|v| v.to_string())
                .unwrap_or_default();
            assert!(
                found.contains("compute-only") && found.contains("no NVIDIA Vulkan ICD"),
                "{found}"
            );
        }
    }
}

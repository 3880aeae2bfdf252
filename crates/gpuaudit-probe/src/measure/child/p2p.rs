//! GPU <-> GPU copies: the peer access state of every ordered pair, one-direction bandwidth,
//! both directions at once, and the time of back-to-back 4-byte copies.

use super::cu::{self, human_bytes, DevBuf, Event, Gpu, Stream, R};
use super::{gbps, progress, Ctx, Fail};
use crate::measure::plan::{self, Group, P2pParams};
use cudarc::driver::sys;
use gpuaudit_core::facts::{P2pBidir, P2pMatrix, P2pPair, Verify};
use gpuaudit_core::Reading;

const PEER_ACCESS_ALREADY_ENABLED: u32 = 704;

fn seed(gpu: u32) -> u32 {
    0x9000_0000 | gpu
}

/// Enables `from`'s access to `to`'s memory (what PyTorch does before a peer copy).
fn enable_peer(from: &Gpu, to: &Gpu) -> R<()> {
    from.bind()?;
    // SAFETY: both contexts are live primary contexts.
    let r = unsafe { sys::cuCtxEnablePeerAccess(to.ctx, 0) };
    if r as u32 == PEER_ACCESS_ALREADY_ENABLED {
        return Ok(());
    }
    cu::ck(r, "cuCtxEnablePeerAccess")
}

struct Side {
    src: DevBuf,
    dst: DevBuf,
    stream: Stream,
}

pub fn run(ctx: &Ctx, p: &P2pParams) -> R<P2pMatrix> {
    let gpus = &ctx.gpus;
    if gpus.len() < 2 {
        return Err(Fail("fewer than two GPUs could be opened".into()));
    }
    let mut size = p.size;
    for g in gpus {
        let (free, _) = g.mem_info()?;
        size = size.min((free / 4) & !0xFFFF);
    }
    if size < (16 << 20) {
        return Err(Fail("not enough free device memory for the copies".into()));
    }
    let mut sides = Vec::new();
    for (gi, g) in gpus.iter().enumerate() {
        let side = Side {
            src: DevBuf::new(g, size)?,
            dst: DevBuf::new(g, size)?,
            stream: Stream::new(g)?,
        };
        cu::write_pattern_dev(
            g,
            &ctx.kernels[gi],
            &side.stream,
            side.src.ptr,
            size,
            seed(g.index),
        )?;
        side.stream.sync()?;
        sides.push(side);
    }
    // Peer access first, for every pair that can have it.
    let n = gpus.len();
    let mut can = vec![vec![false; n]; n];
    let mut enable_err: Vec<Vec<Option<String>>> = vec![vec![None; n]; n];
    for i in 0..n {
        for j in 0..n {
            if i != j {
                can[i][j] = cu::can_access_peer(gpus[i].dev, gpus[j].dev)?;
                if can[i][j] {
                    if let Err(e) = enable_peer(&gpus[i], &gpus[j]) {
                        enable_err[i][j] = Some(e.0);
                    }
                }
            }
        }
    }

    let ordered = plan::ordered_pairs(n);
    let unordered = plan::unordered_pairs(n);
    let total = (ordered.len() + unordered.len()) as f64;
    let mut done = 0.0;
    let mut pairs = Vec::new();
    for &(i, j) in &ordered {
        done += 1.0;
        progress(
            Group::P2p,
            done / total,
            format!(
                "GPU {} -> GPU {} ({})",
                gpus[i].index,
                gpus[j].index,
                human_bytes(size)
            ),
        );
        let (a, b) = (&gpus[i], &gpus[j]);
        let (sa, sb) = (&sides[i], &sides[j]);
        let s = &sa.stream;
        let one = |bytes: u64, count: u32| -> R<()> {
            for _ in 0..count {
                cu::peer_async(sb.dst.ptr, b.ctx, sa.src.ptr, a.ctx, bytes, s)?;
            }
            Ok(())
        };
        let bw = (|| -> R<f64> {
            a.bind()?;
            one(size, 1)?;
            s.sync()?;
            let ms = cu::time_on(a, s, || one(size, p.repeats.max(1)))?;
            Ok(gbps(size as f64 * p.repeats.max(1) as f64, ms))
        })();
        let verify = bw.as_ref().ok().map(|_| -> Verify {
            let r = (|| -> R<u64> {
                b.bind()?;
                cu::memset_d32_async(sb.dst.ptr, 0, size / 4, &sb.stream)?;
                sb.stream.sync()?;
                a.bind()?;
                one(size, 1)?;
                s.sync()?;
                cu::check_pattern_dev(
                    b,
                    &ctx.kernels[j],
                    &sb.stream,
                    sb.dst.ptr,
                    size,
                    seed(a.index),
                )
            })();
            let what = format!(
                "GPU {} -> GPU {} {}: pattern compared on the destination",
                a.index,
                b.index,
                human_bytes(size)
            );
            match r {
                Ok(bad) => Verify {
                    what,
                    ok: bad == 0,
                    detail: (bad > 0).then(|| format!("{bad} words differ")),
                },
                Err(e) => Verify {
                    what,
                    ok: false,
                    detail: Some(e.0),
                },
            }
        });
        let latency = (|| -> R<f64> {
            a.bind()?;
            one(4, 10)?;
            s.sync()?;
            let count = p.latency_copies.max(1);
            let ms = cu::time_on(a, s, || one(4, count))?;
            Ok(ms * 1e3 / count as f64)
        })();
        let note = |r: R<f64>| -> Reading<f64> {
            match r {
                Ok(v) => Reading::Value(v),
                Err(e) => Reading::Unavailable(match &enable_err[i][j] {
                    Some(pe) => format!("{}; peer access: {pe}", e.0),
                    None => e.0,
                }),
            }
        };
        pairs.push(P2pPair {
            src: a.index,
            dst: b.index,
            peer_access: can[i][j],
            gbps: note(bw),
            latency_us: note(latency),
            verify,
        });
    }

    let mut bidirectional = Vec::new();
    for &(i, j) in &unordered {
        done += 1.0;
        progress(
            Group::P2p,
            done / total,
            format!("GPU {} <-> GPU {}", gpus[i].index, gpus[j].index),
        );
        let r = bidir(
            &gpus[i],
            &gpus[j],
            &sides[i],
            &sides[j],
            size,
            p.repeats.max(1),
        );
        bidirectional.push(P2pBidir {
            a: gpus[i].index,
            b: gpus[j].index,
            gbps: match r {
                Ok(v) => Reading::Value(v),
                Err(e) => Reading::Unavailable(e.0),
            },
        });
    }
    Ok(P2pMatrix {
        gpus: gpus.iter().map(|g| g.index).collect(),
        size_bytes: size,
        pairs,
        bidirectional,
    })
}

/// Both directions at once, each on its source GPU's stream, from one common start event to
/// the later of the two ends.
fn bidir(a: &Gpu, b: &Gpu, sa: &Side, sb: &Side, size: u64, repeats: u32) -> R<f64> {
    let run = |count: u32, timed: bool| -> R<f64> {
        a.bind()?;
        let start = Event::new(a)?;
        let end_a = Event::new(a)?;
        b.bind()?;
        let end_b = Event::new(b)?;
        a.bind()?;
        start.record(&sa.stream)?;
        b.bind()?;
        sb.stream.wait(&start)?;
        a.bind()?;
        for _ in 0..count {
            cu::peer_async(sb.dst.ptr, b.ctx, sa.src.ptr, a.ctx, size, &sa.stream)?;
        }
        b.bind()?;
        for _ in 0..count {
            cu::peer_async(sa.dst.ptr, a.ctx, sb.src.ptr, b.ctx, size, &sb.stream)?;
        }
        end_b.record(&sb.stream)?;
        a.bind()?;
        sa.stream.wait(&end_b)?;
        end_a.record(&sa.stream)?;
        end_a.sync()?;
        if timed {
            start.ms_to(&end_a)
        } else {
            Ok(0.0)
        }
    };
    run(1, false)?;
    let ms = run(repeats, true)?;
    Ok(gbps(2.0 * size as f64 * repeats as f64, ms))
}

//! GPU <-> GPU copies: the peer access state of every ordered pair, one-direction bandwidth,
//! both directions at once, and the time of back-to-back 4-byte copies.

use super::plan::{self, P2pParams};
use crate::measure::child::cu::{self, human_bytes, DevBuf, Event, Gpu, Stream, R};
use crate::measure::child::{gbps, progress, reading, Ctx, Fail};
use crate::measure::GpuGroup;
use cudarc::driver::sys;
use gpuaudit_core::facts::{P2pBidir, P2pMatrix, P2pPair, P2pPattern, PatternKind, Verify};
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
            GpuGroup::P2p,
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
            GpuGroup::P2p,
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
    let patterns = if p.patterns {
        let mut v = Vec::new();
        for (hub, hub_gpu) in gpus.iter().enumerate() {
            for kind in [PatternKind::OneToAll, PatternKind::AllToOne] {
                progress(
                    GpuGroup::P2p,
                    0.99,
                    format!("{} GPU {}", kind.label(), hub_gpu.index),
                );
                v.push(pattern(ctx, &sides, hub, kind, size, p.repeats.max(1)));
            }
        }
        v
    } else {
        Vec::new()
    };
    Ok(P2pMatrix {
        gpus: gpus.iter().map(|g| g.index).collect(),
        size_bytes: size,
        pairs,
        bidirectional,
        patterns,
    })
}

/// One copy of a pattern: from GPU `src` (index into the context's GPUs) to `dst`, issued on
/// a stream of GPU `on`.
struct PatternCopy<'a> {
    src: usize,
    dst: usize,
    src_ptr: u64,
    dst_ptr: u64,
    on: usize,
    stream: &'a Stream,
}

/// One GPU to all the others (each copy on its own stream of the source), or all the others
/// to one (each on its source's stream, into its own slice of a buffer on the destination),
/// all at once from one start event to the last end; the data of every copy verified.
fn pattern(
    ctx: &Ctx,
    sides: &[Side],
    hub: usize,
    kind: PatternKind,
    size: u64,
    repeats: u32,
) -> P2pPattern {
    let gpus = &ctx.gpus;
    let peers: Vec<usize> = (0..gpus.len()).filter(|&j| j != hub).collect();
    let mut verify = None;
    let gbps = (|| -> R<f64> {
        let hub_gpu = &gpus[hub];
        // Streams on the source for one-to-all; a buffer of one slice per source for
        // all-to-one (the sources must not write over each other).
        let mut own_streams = Vec::new();
        let mut inbox = None;
        match kind {
            PatternKind::OneToAll => {
                for _ in &peers {
                    own_streams.push(Stream::new(hub_gpu)?);
                }
            }
            PatternKind::AllToOne => {
                let (free, _) = hub_gpu.mem_info()?;
                let want = size * peers.len() as u64;
                if free / 2 < want {
                    return Err(Fail(format!(
                        "GPU {}: not enough free memory for {} of incoming copies",
                        hub_gpu.index,
                        human_bytes(want)
                    )));
                }
                inbox = Some(DevBuf::new(hub_gpu, want)?);
            }
        }
        let copies: Vec<PatternCopy> = peers
            .iter()
            .enumerate()
            .map(|(k, &j)| match kind {
                PatternKind::OneToAll => PatternCopy {
                    src: hub,
                    dst: j,
                    src_ptr: sides[hub].src.ptr,
                    dst_ptr: sides[j].dst.ptr,
                    on: hub,
                    stream: &own_streams[k],
                },
                PatternKind::AllToOne => PatternCopy {
                    src: j,
                    dst: hub,
                    src_ptr: sides[j].src.ptr,
                    dst_ptr: inbox.as_ref().map_or(0, |b| b.at(k as u64 * size)),
                    on: j,
                    stream: &sides[j].stream,
                },
            })
            .collect();
        let hub_stream = Stream::new(hub_gpu)?;
        let run = |count: u32| -> R<f64> {
            let start = Event::new(hub_gpu)?;
            let end = Event::new(hub_gpu)?;
            start.record(&hub_stream)?;
            let mut ends = Vec::new();
            for c in &copies {
                let g = &gpus[c.on];
                g.bind()?;
                c.stream.wait(&start)?;
                for _ in 0..count {
                    cu::peer_async(
                        c.dst_ptr,
                        gpus[c.dst].ctx,
                        c.src_ptr,
                        gpus[c.src].ctx,
                        size,
                        c.stream,
                    )?;
                }
                let e = Event::new(g)?;
                e.record(c.stream)?;
                ends.push(e);
            }
            hub_gpu.bind()?;
            for e in &ends {
                hub_stream.wait(e)?;
            }
            end.record(&hub_stream)?;
            end.sync()?;
            start.ms_to(&end)
        };
        // Clear the destinations, warm up (and so copy once), then check every copy's data.
        for c in &copies {
            let d = &gpus[c.dst];
            d.bind()?;
            cu::memset_d32_async(c.dst_ptr, 0, size / 4, &sides[c.dst].stream)?;
            sides[c.dst].stream.sync()?;
        }
        run(1)?;
        let mut wrong = Vec::new();
        for c in &copies {
            let bad = cu::check_pattern_dev(
                &gpus[c.dst],
                &ctx.kernels[c.dst],
                &sides[c.dst].stream,
                c.dst_ptr,
                size,
                seed(gpus[c.src].index),
            )?;
            if bad > 0 {
                wrong.push(format!(
                    "GPU {} -> GPU {}: {bad} words differ",
                    gpus[c.src].index, gpus[c.dst].index
                ));
            }
        }
        verify = Some(Verify {
            what: format!(
                "{} GPU {} {}: pattern compared on every destination",
                kind.label(),
                hub_gpu.index,
                human_bytes(size)
            ),
            ok: wrong.is_empty(),
            detail: (!wrong.is_empty()).then(|| wrong.join("; ")),
        });
        if !wrong.is_empty() {
            return Err(Fail(format!("copied data differs: {}", wrong.join("; "))));
        }
        let ms = run(repeats)?;
        Ok(gbps(size as f64 * copies.len() as f64 * repeats as f64, ms))
    })();
    P2pPattern {
        kind,
        gpu: gpus[hub].index,
        peers: peers.iter().map(|&j| gpus[j].index).collect(),
        size_bytes: size,
        gbps: reading(gbps),
        verify,
    }
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

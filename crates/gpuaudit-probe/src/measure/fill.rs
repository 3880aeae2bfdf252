//! The host's copy of the kernels' data: the same random values and word patterns as
//! kernels.cu, bit for bit, so that any element the GPU wrote can be checked on the CPU.

/// MurmurHash3's 64-bit finaliser (kernels.cu `mix64`).
pub fn mix64(mut x: u64) -> u64 {
    x ^= x >> 33;
    x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
    x ^= x >> 33;
    x = x.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    x ^= x >> 33;
    x
}

/// Element `i` of the random stream `seed` (kernels.cu `rnd`).
pub fn rnd(seed: u64, i: u64) -> u64 {
    mix64(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15).wrapping_add(i))
}

pub fn bits_f64(seed: u64, i: u64) -> u64 {
    let r = rnd(seed, i);
    let s = r >> 63;
    let e = 1022 + ((r >> 62) & 1);
    let m = r & 0xF_FFFF_FFFF_FFFF;
    (s << 63) | (e << 52) | m
}

pub fn bits_f32(seed: u64, i: u64) -> u32 {
    let r = rnd(seed, i);
    let s = (r >> 63) as u32;
    let e = 126 + ((r >> 62) & 1) as u32;
    let m = ((r >> 9) & 0x7F_FFFF) as u32;
    (s << 31) | (e << 23) | m
}

pub fn bits_f16(seed: u64, i: u64) -> u16 {
    let r = rnd(seed, i);
    let s = (r >> 63) as u32;
    let e = 14 + ((r >> 62) & 1) as u32;
    let m = ((r >> 20) & 0x3FF) as u32;
    ((s << 15) | (e << 10) | m) as u16
}

pub fn bits_bf16(seed: u64, i: u64) -> u16 {
    let r = rnd(seed, i);
    let s = (r >> 63) as u32;
    let e = 126 + ((r >> 62) & 1) as u32;
    let m = ((r >> 20) & 0x7F) as u32;
    ((s << 15) | (e << 7) | m) as u16
}

pub fn bits_e4m3(seed: u64, i: u64) -> u8 {
    let r = rnd(seed, i);
    let s = (r >> 63) as u32;
    let e = 6 + ((r >> 62) & 1) as u32;
    let m = ((r >> 20) & 0x7) as u32;
    ((s << 7) | (e << 3) | m) as u8
}

/// IEEE half to f64 (every finite value; infinities and NaN too).
pub fn decode_f16(h: u16) -> f64 {
    let s = if h & 0x8000 != 0 { -1.0 } else { 1.0 };
    let e = ((h >> 10) & 0x1F) as i32;
    let m = (h & 0x3FF) as f64;
    match e {
        0 => s * m * 2f64.powi(-24),
        31 if m == 0.0 => s * f64::INFINITY,
        31 => f64::NAN,
        _ => s * (1.0 + m / 1024.0) * 2f64.powi(e - 15),
    }
}

pub fn decode_bf16(b: u16) -> f64 {
    f32::from_bits((b as u32) << 16) as f64
}

/// fp8 e4m3 (OCP / NVIDIA `__nv_fp8_e4m3`: bias 7, no infinities, S.1111.111 is NaN).
pub fn decode_e4m3(b: u8) -> f64 {
    let s = if b & 0x80 != 0 { -1.0 } else { 1.0 };
    let e = ((b >> 3) & 0xF) as i32;
    let m = (b & 0x7) as f64;
    if e == 15 && m == 7.0 {
        return f64::NAN;
    }
    if e == 0 {
        s * m / 8.0 * 2f64.powi(-6)
    } else {
        s * (1.0 + m / 8.0) * 2f64.powi(e - 7)
    }
}

/// Word `word` of the bandwidth pattern (kernels.cu `pat`).
pub fn pat(word: u64, seed: u32) -> u32 {
    (word as u32).wrapping_mul(2_654_435_761) ^ seed
}

/// XOR of the first `words` words of the pattern, which the read kernel must reproduce.
pub fn pattern_xor(words: u64, seed: u32) -> u32 {
    let threads = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
        .clamp(1, 32) as u64;
    let chunk = words.div_ceil(threads).max(1);
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                s.spawn(move || {
                    let from = t * chunk;
                    let to = ((t + 1) * chunk).min(words);
                    let mut x = 0u32;
                    let mut w = from;
                    while w < to {
                        // The seed cancels in pairs; leave it out and fold it in once below.
                        x ^= (w as u32).wrapping_mul(2_654_435_761);
                        w += 1;
                    }
                    x
                })
            })
            .collect();
        let x = handles
            .into_iter()
            .fold(0u32, |acc, h| acc ^ h.join().unwrap_or(0));
        if words % 2 == 1 {
            x ^ seed
        } else {
            x
        }
    })
}

/// Writes the pattern into a host buffer (little-endian words), using every core: a 1 GiB
/// buffer takes a few tens of milliseconds instead of a second.
pub fn fill_pattern(buf: &mut [u8], seed: u32) {
    let threads = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
        .clamp(1, 32);
    // Chunks are whole words so every thread knows its first word index.
    let chunk = (buf.len() / threads / 4 + 1) * 4;
    std::thread::scope(|s| {
        for (c, part) in buf.chunks_mut(chunk).enumerate() {
            s.spawn(move || {
                let first = (c * chunk / 4) as u64;
                let whole = (part.len() / 4) as u64;
                let mut words = part.chunks_exact_mut(4);
                for (k, w) in (&mut words).enumerate() {
                    w.copy_from_slice(&pat(first + k as u64, seed).to_le_bytes());
                }
                let rest = words.into_remainder();
                if !rest.is_empty() {
                    let v = pat(first + whole, seed).to_le_bytes();
                    let n = rest.len();
                    rest.copy_from_slice(&v[..n]);
                }
            });
        }
    });
}

/// Words of a host buffer that differ from the pattern, checking every `step`-th word (1:
/// all) plus the first and last 4096 words.
pub fn check_pattern(buf: &[u8], seed: u32, step: usize) -> u64 {
    let words = buf.len() / 4;
    let step = step.max(1);
    let word = |k: usize| -> u32 {
        let b = &buf[k * 4..k * 4 + 4];
        u32::from_le_bytes([b[0], b[1], b[2], b[3]])
    };
    let mut bad = 0u64;
    let mut check = |k: usize| {
        if word(k) != pat(k as u64, seed) {
            bad += 1;
        }
    };
    let edge = 4096.min(words);
    let tail = words.saturating_sub(edge).max(edge);
    (0..edge).for_each(&mut check);
    (tail..words).for_each(&mut check);
    (edge.div_ceil(step) * step..tail)
        .step_by(step)
        .for_each(&mut check);
    bad
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_modest_and_nonzero() {
        for i in 0..2000 {
            let f = f64::from_bits(bits_f64(7, i)).abs();
            assert!((0.5..2.0).contains(&f), "{f}");
            let f = f32::from_bits(bits_f32(7, i)).abs();
            assert!((0.5..2.0).contains(&f), "{f}");
            let f = decode_f16(bits_f16(7, i)).abs();
            assert!((0.5..2.0).contains(&f), "{f}");
            let f = decode_bf16(bits_bf16(7, i)).abs();
            assert!((0.5..2.0).contains(&f), "{f}");
            let f = decode_e4m3(bits_e4m3(7, i)).abs();
            assert!((0.5..2.0).contains(&f), "{f}");
        }
    }

    #[test]
    fn both_signs_and_many_mantissas() {
        let neg = (0..1000)
            .filter(|&i| f32::from_bits(bits_f32(1, i)) < 0.0)
            .count();
        assert!((400..600).contains(&neg), "{neg}");
        let mut distinct: Vec<u16> = (0..1000).map(|i| bits_bf16(1, i)).collect();
        distinct.sort_unstable();
        distinct.dedup();
        assert!(distinct.len() > 400, "{}", distinct.len());
        // Different seeds, different streams.
        assert_ne!(bits_f64(1, 0), bits_f64(2, 0));
    }

    #[test]
    fn decoders_match_known_values() {
        assert_eq!(decode_f16(0x3C00), 1.0);
        assert_eq!(decode_f16(0xC000), -2.0);
        assert_eq!(decode_f16(0x3800), 0.5);
        assert_eq!(decode_f16(0x0001), 2f64.powi(-24));
        assert_eq!(decode_bf16(0x3F80), 1.0);
        assert_eq!(decode_bf16(0xBF00), -0.5);
        assert_eq!(decode_e4m3(0x38), 1.0); // 0.0111.000
        assert_eq!(decode_e4m3(0x7E), 448.0); // the largest finite value
        assert!(decode_e4m3(0x7F).is_nan());
        assert_eq!(decode_e4m3(0x01), 2f64.powi(-9));
    }

    #[test]
    fn pattern_fill_and_check_agree() {
        let mut buf = vec![0u8; 4 * 100_003 + 2];
        fill_pattern(&mut buf, 0xABCD);
        assert_eq!(check_pattern(&buf, 0xABCD, 1), 0);
        assert_eq!(check_pattern(&buf, 0xABCD, 97), 0);
        assert_eq!(
            u32::from_le_bytes([buf[40], buf[41], buf[42], buf[43]]),
            pat(10, 0xABCD)
        );
        buf[4 * 5000] ^= 1;
        assert_eq!(check_pattern(&buf, 0xABCD, 1), 1);
        // The flipped word is in the middle: a sampled check sees it only on its stride.
        assert_eq!(check_pattern(&buf, 0xABCD, 1000), 1);
        assert_eq!(check_pattern(&buf, 0xABCD, 7), 0);
        // Edges are always checked in full.
        let n = buf.len();
        buf[n - 8] ^= 1;
        assert_eq!(check_pattern(&buf, 0xABCD, 7), 1);
    }

    #[test]
    fn pattern_xor_matches_a_plain_loop() {
        for (n, seed) in [(0u64, 5u32), (1, 5), (12345, 0xDEAD), (4096, 1)] {
            let mut x = 0u32;
            for w in 0..n {
                x ^= pat(w, seed);
            }
            assert_eq!(pattern_xor(n, seed), x, "{n}");
        }
    }
}

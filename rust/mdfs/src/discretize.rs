//! Randomised quantile discretization, bit-identical to the reference's.
//!
//! The thresholds of variable `var_id` in discretization `t` come from d+1 random
//! weights drawn from mt19937(mt19937(mt19937(seed)() ^ t)() ^ var_id); each weight is
//! a share of the sorted values. Only the sorted column is needed, so a column is
//! sorted once and serves every discretization.

use crate::mt::Mt19937;

pub fn thresholds(sorted: &[f64], seed: u32, t: u32, var_id: u32, divisions: usize, range: f64) -> Vec<f64> {
    let n = sorted.len();
    let mut g0 = Mt19937::new(seed);
    let mut g1 = Mt19937::new(g0.next_u32() ^ t);
    let mut g = Mt19937::new(g1.next_u32() ^ var_id);
    let (a, b) = (1.0 - range, 1.0 + range);
    let mut weights = Vec::with_capacity(divisions);
    let mut sum = 0.0f64;
    for _ in 0..divisions {
        let w = g.uniform(a, b);
        weights.push(w);
        sum += w;
    }
    sum += g.uniform(a, b); // the last bin's weight only enters the total
    let step = n as f64 / sum;
    let mut done = 0usize;
    weights
        .iter()
        .map(|w| {
            // lround: halves away from zero, as f64::round does
            done += (w * step).round() as usize;
            if done >= n {
                done = n - 1;
            }
            sorted[done]
        })
        .collect()
}

/// bin(x) = number of thresholds x is strictly greater than (ties go down).
#[inline]
pub fn bin(x: f64, thr: &[f64]) -> u8 {
    thr.iter().filter(|&&t| x > t).count() as u8
}

pub fn sorted_copy(col: &[f64]) -> Vec<f64> {
    let mut s = col.to_vec();
    s.sort_by(|a, b| a.total_cmp(b));
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zero_range_is_plain_quantile_binning() {
        let col: Vec<f64> = (0..100).map(|i| ((i * 37) % 100) as f64).collect();
        let s = sorted_copy(&col);
        let thr = thresholds(&s, 0, 0, 0, 3, 0.0);
        assert_eq!(thr, vec![25.0, 50.0, 75.0]);
        let counts = (0..4).map(|b| col.iter().filter(|&&x| bin(x, &thr) == b).count()).collect::<Vec<_>>();
        assert_eq!(counts, vec![26, 25, 25, 24]);
    }

    #[test]
    fn thresholds_depend_on_discretization_and_variable() {
        let col: Vec<f64> = (0..1000).map(|i| i as f64).collect();
        let a = thresholds(&col, 7, 0, 3, 2, 0.5);
        assert_ne!(a, thresholds(&col, 7, 1, 3, 2, 0.5));
        assert_ne!(a, thresholds(&col, 7, 0, 4, 2, 0.5));
        assert_eq!(a, thresholds(&col, 7, 0, 3, 2, 0.5));
    }
}

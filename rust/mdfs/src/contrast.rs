//! Contrast variables: shuffled copies of real columns, drawn as the reference draws
//! them from one mt19937(seed) (plain modulo with redraws, no std::shuffle).

use crate::mt::Mt19937;

/// Source columns and, per contrast, the row permutation (contrast[j][o] = data[src[j]][perm[j][o]]).
pub fn draw(n: usize, p: usize, n_contrast: usize, seed: u32) -> (Vec<usize>, Vec<Vec<usize>>) {
    let mut g = Mt19937::new(seed);
    let mut src = Vec::with_capacity(n_contrast);
    if n_contrast > p {
        // libstdc++ uniform_int_distribution(0, p-1) on a 32-bit engine: Lemire's
        // multiply-shift with rejection of the biased low products.
        let range = p as u64;
        for _ in 0..n_contrast {
            let mut prod = g.next_u32() as u64 * range;
            if (prod as u32 as u64) < range {
                let threshold = (range.wrapping_neg() as u32 as u64) % range;
                while (prod as u32 as u64) < threshold {
                    prod = g.next_u32() as u64 * range;
                }
            }
            src.push((prod >> 32) as usize);
        }
    } else {
        let mut used = vec![false; p];
        for _ in 0..n_contrast {
            let mut s = g.next_u32() as usize % p;
            while used[s] {
                s = g.next_u32() as usize % p;
            }
            used[s] = true;
            src.push(s);
        }
    }
    let perms = (0..n_contrast)
        .map(|_| {
            let mut used = vec![false; n];
            (0..n)
                .map(|_| {
                    let mut s = g.next_u32() as usize % n;
                    while used[s] {
                        s = g.next_u32() as usize % n;
                    }
                    used[s] = true;
                    s
                })
                .collect()
        })
        .collect();
    (src, perms)
}

#[cfg(test)]
mod tests {
    #[test]
    fn permutations_are_permutations_and_sources_distinct() {
        let (src, perms) = super::draw(50, 10, 10, 3);
        let mut s = src.clone();
        s.sort();
        assert_eq!(s, (0..10).collect::<Vec<_>>());
        for p in perms {
            let mut q = p.clone();
            q.sort();
            assert_eq!(q, (0..50).collect::<Vec<_>>());
        }
    }
}

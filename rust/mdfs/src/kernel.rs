//! Counting and information gain over all k-tuples of variables.
//!
//! Objects are reordered so that class 0 comes first; a variable's bin is then kept
//! as one bitset per bin value, split into the class-0 and class-1 words. The count
//! of a cell of a tuple is popcount(AND of its members' bitsets) per class, and
//! the AND of a tuple's first k-1 members (the prefix) is shared by every last
//! member. The last bin of the last member follows from the prefix count by
//! subtraction. When m^k is large, a plain loop over the objects is cheaper and is
//! used instead (`Strategy::Objects`).
//!
//! For k >= 2, entropies are computed in f64 from tables of x log2 x at x = count +
//! pseudocount, which is exact where the reference accumulates in f32 (differences
//! stay within its rounding, ~1e-4 bits x objects). In 1D the reference's f32
//! arithmetic is reproduced step by step (`Exact1d`): there p-values are chi-square
//! ones with d degrees of freedom (at most divided by a constant), and for d = 1 log10 p
//! near IG = 0 is steep (~7e-3 per 1e-3 of IG at IG = 1e-3, growing as 1/sqrt(IG)),
//! so only bit-identical IGs agree within 1e-3 in log10 everywhere.

use crate::discretize::{bin, sorted_copy, thresholds};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

pub const MAX_K: usize = 5;

/// What a unit of work covers, within one discretization.
#[derive(Clone, Copy, Debug)]
pub enum Unit {
    /// every tuple of real variables whose first member is this variable
    Real(u32),
    /// k = 1: this contrast variable; k > 1: every (k-1)-subtuple of real variables
    /// whose first member is this variable, with every contrast variable last
    Contrast(u32),
}

#[derive(Clone, Copy, PartialEq)]
enum Strategy {
    Bits,
    Objects,
}

/// The best tuple of a variable: IG, then the earliest (discretization, tuple) on ties,
/// which is what the reference's sequential scan keeps.
#[derive(Clone, Copy)]
pub struct Best {
    pub ig: f64,
    pub t: u32,
    pub tuple: [u32; MAX_K],
}

impl Best {
    const NONE: Best = Best { ig: f64::NEG_INFINITY, t: u32::MAX, tuple: [u32::MAX; MAX_K] };

    #[inline]
    fn offer(&mut self, ig: f64, t: u32, tuple: &[u32; MAX_K]) {
        if ig > self.ig || (ig == self.ig && (t, *tuple) < (self.t, self.tuple)) {
            *self = Best { ig, t, tuple: *tuple };
        }
    }
}

pub struct Results {
    pub best: Vec<Best>,
    pub contrast: Vec<f64>,
}

impl Results {
    fn new(p: usize, nc: usize) -> Self {
        Results { best: vec![Best::NONE; p], contrast: vec![f64::NEG_INFINITY; nc] }
    }

    fn merge(&mut self, other: &Results) {
        for (a, b) in self.best.iter_mut().zip(&other.best) {
            a.offer(b.ig, b.t, &b.tuple);
        }
        for (a, b) in self.contrast.iter_mut().zip(&other.contrast) {
            *a = a.max(*b);
        }
    }
}

/// x log2 x at x = count + pseudocount, for count 0..=n: `f[c]` per class and `s` for
/// the two classes' sum.
struct Tables {
    f: [Vec<f64>; 2],
    s: Vec<f64>,
}

impl Tables {
    fn new(n: usize, pc: [f64; 2]) -> Self {
        let xlx = |x: f64| x * x.log2();
        Tables {
            f: [(0..=n).map(|c| xlx(c as f64 + pc[0])).collect(), (0..=n).map(|c| xlx(c as f64 + pc[1])).collect()],
            s: (0..=n).map(|c| xlx(c as f64 + pc[0] + pc[1])).collect(),
        }
    }

    /// H(Y | cells) = sum over cells of S log2 S - N0 log2 N0 - N1 log2 N1.
    #[inline]
    fn h(&self, counts: &[[u32; 2]]) -> f64 {
        counts.iter().map(|&[a, b]| self.cell(a, b)).sum()
    }

    #[inline]
    fn cell(&self, a: u32, b: u32) -> f64 {
        self.s[(a + b) as usize] - self.f[0][a as usize] - self.f[1][b as usize]
    }
}

/// The reference's 1D arithmetic, every step rounded to f32 as it does it: cell =
/// count + pseudocount, H(Y|X) summed over the cells in bin order (class 0's term,
/// then class 1's), log2 from the C library's log2f (which the reference calls),
/// and IG = H(Y) - H(Y|X). Costs m cells per variable, nothing next to counting.
struct Exact1d {
    pc: [f32; 2],
    /// H(Y) from the class totals n_c + m * p_c
    h_y: f32,
}

impl Exact1d {
    fn new(n: [usize; 2], pc: [f32; 2], m: usize) -> Self {
        let totals = [0, 1].map(|c| n[c] as f32 + pc[c] * m as f32);
        Exact1d { pc, h_y: Self::h(std::iter::once(totals)) }
    }

    fn h(cells: impl Iterator<Item = [f32; 2]>) -> f32 {
        let mut h = 0.0f32;
        for [a, b] in cells {
            let s = a + b;
            h -= a * (a / s).log2();
            h -= b * (b / s).log2();
        }
        h
    }

    fn cells<'a>(&self, counts: &'a [[u32; 2]]) -> impl Iterator<Item = [f32; 2]> + 'a {
        let pc = self.pc;
        counts.iter().map(move |&[a, b]| [a as f32 + pc[0], b as f32 + pc[1]])
    }

    /// IG of a real variable: H(Y) is the reference's precomputed one.
    fn ig(&self, counts: &[[u32; 2]]) -> f64 {
        (self.h_y - Self::h(self.cells(counts))) as f64
    }

    /// IG of a contrast variable: the reference scores it as a tuple of one contrast,
    /// whose H(Y) comes from summing the pseudocounted cells in bin order, so it can
    /// differ from `h_y` in the last bits.
    fn ig_contrast(&self, counts: &[[u32; 2]]) -> f64 {
        let mut totals = [0.0f32; 2];
        for [a, b] in self.cells(counts) {
            totals = [totals[0] + a, totals[1] + b];
        }
        (Self::h(std::iter::once(totals)) - Self::h(self.cells(counts))) as f64
    }
}

pub struct Analysis {
    n: [usize; 2],
    p: usize,
    nc: usize,
    k: usize,
    m: usize,
    seed: u32,
    range: f64,
    strategy: Strategy,
    words: [usize; 2],
    cols: Vec<Vec<f64>>,   // real then contrast columns, objects in class order
    sorted: Vec<Vec<f64>>, // each column sorted, for the thresholds
    full: Tables,          // pseudocount p_c: cells of the whole tuple
    reduced: Tables,       // pseudocount m * p_c: one member summed out
    exact1d: Exact1d,      // k = 1
    current: Option<u32>,  // the discretization `bins`/`bits` hold
    bins: Vec<u8>,         // [column][object]
    bits: Vec<u64>,        // [column][bin][word]
    mask: Vec<u64>,        // every object
    pub results: Results,
}

struct Scratch {
    /// per prefix level L: m^L cells' bitsets (Bits) or one code per object (Objects)
    prefix_bits: Vec<Vec<u64>>,
    prefix_code: Vec<Vec<u32>>,
    prefix_counts: Vec<Vec<[u32; 2]>>,
    full: Vec<[u32; 2]>,
    reduced: Vec<[u32; 2]>,
    tuple: [u32; MAX_K],
}

impl Analysis {
    /// `columns`: real then contrast variables, each n values; `y` in {0, 1}.
    /// The other arguments are the reference library's parameters, one for one.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        columns: Vec<Vec<f64>>,
        p: usize,
        y: &[u8],
        k: usize,
        divisions: usize,
        pc_xi: f64,
        seed: u32,
        range: f64,
    ) -> Result<Self, String> {
        let n = y.len();
        if !(1..=MAX_K).contains(&k) {
            return Err(format!("dimensions must be 1..{MAX_K}, got {k}"));
        }
        if !(1..=15).contains(&divisions) {
            return Err(format!("divisions must be 1..15, got {divisions}"));
        }
        if p < k {
            return Err(format!("{p} variables cannot form tuples of {k}"));
        }
        if columns.len() < p || columns.iter().any(|c| c.len() != n) {
            return Err("every column must have one value per object".into());
        }
        let order: Vec<usize> = (0..n).filter(|&o| y[o] == 0).chain((0..n).filter(|&o| y[o] == 1)).collect();
        if order.len() != n {
            return Err("the decision must be 0 or 1".into());
        }
        let n1 = y.iter().filter(|&&c| c == 1).count();
        let counts = [n - n1, n1];
        if counts[0] == 0 || counts[1] == 0 {
            return Err("both decision classes must be present".into());
        }
        let m = divisions + 1;
        // The reference's pseudocounts are f32: p_c = n_c / min(n_0, n_1) * pc_xi.
        let cmin = counts[0].min(counts[1]) as f32;
        let pc32 = [0, 1].map(|c| counts[c] as f32 / cmin * pc_xi as f32);
        let pc = pc32.map(f64::from);
        let words = [counts[0].div_ceil(64), counts[1].div_ceil(64)];
        let w = words[0] + words[1];
        let cells_before_last = m.pow(k as u32 - 1);
        // Word operations of one last member by bitsets, against ~2 per object and member.
        let strategy = if (m - 1) * cells_before_last * w <= 2 * n * k { Strategy::Bits } else { Strategy::Objects };
        let mut mask = vec![0u64; w];
        for c in 0..2 {
            for i in 0..counts[c] {
                mask[c * words[0] + i / 64] |= 1 << (i % 64);
            }
        }
        let nc = columns.len() - p;
        let sorted = columns.iter().map(|c| sorted_copy(c)).collect();
        let cols = columns.into_iter().map(|c| order.iter().map(|&o| c[o]).collect()).collect();
        Ok(Analysis {
            n: counts,
            p,
            nc,
            k,
            m,
            seed,
            range,
            strategy,
            words,
            cols,
            sorted,
            full: Tables::new(n, pc),
            reduced: Tables::new(n, pc.map(|x| x * m as f64)),
            exact1d: Exact1d::new(counts, pc32, m),
            current: None,
            bins: Vec::new(),
            bits: Vec::new(),
            mask,
            results: Results::new(p, nc),
        })
    }

    fn n_total(&self) -> usize {
        self.n[0] + self.n[1]
    }

    /// H(Y) with the class totals pseudocounted as in a 1-D table.
    pub fn h_y(&self) -> f64 {
        self.reduced.cell(self.n[0] as u32, self.n[1] as u32)
    }

    /// Bins of one column (objects in input order are not kept: this is for checks).
    pub fn thresholds_of(&self, column: usize, t: u32) -> Vec<f64> {
        thresholds(&self.sorted[column], self.seed, t, column as u32, self.m - 1, self.range)
    }

    fn prepare(&mut self, t: u32, threads: usize) {
        if self.current == Some(t) {
            return;
        }
        let n = self.n_total();
        let (m, w) = (self.m, self.words[0] + self.words[1]);
        let ncol = self.cols.len();
        let mut bins = vec![0u8; ncol * n];
        let mut bits = vec![0u64; if self.strategy == Strategy::Bits { ncol * m * w } else { 0 }];
        let per = ncol.div_ceil(threads.max(1)).max(1);
        let this = &*self;
        std::thread::scope(|s| {
            let bit_chunks: Vec<&mut [u64]> = if bits.is_empty() {
                (0..ncol.div_ceil(per)).map(|_| &mut [][..]).collect()
            } else {
                bits.chunks_mut(per * m * w).collect()
            };
            for (ci, (bchunk, wchunk)) in bins.chunks_mut(per * n).zip(bit_chunks).enumerate() {
                s.spawn(move || {
                    for (j, out) in bchunk.chunks_mut(n).enumerate() {
                        let v = ci * per + j;
                        let thr = thresholds(&this.sorted[v], this.seed, t, v as u32, m - 1, this.range);
                        for (o, x) in this.cols[v].iter().enumerate() {
                            out[o] = bin(*x, &thr);
                        }
                        if !wchunk.is_empty() {
                            let vb = &mut wchunk[j * m * w..(j + 1) * m * w];
                            for (o, &b) in out.iter().enumerate() {
                                let (c, i) = if o < this.n[0] { (0, o) } else { (1, o - this.n[0]) };
                                vb[b as usize * w + c * this.words[0] + i / 64] |= 1 << (i % 64);
                            }
                        }
                    }
                });
            }
        });
        self.bins = bins;
        self.bits = bits;
        self.current = Some(t);
    }

    /// Runs `units` of discretization `t` on `threads` threads, folding into `results`.
    pub fn run(&mut self, t: u32, units: &[Unit], threads: usize) {
        self.prepare(t, threads);
        let next = AtomicUsize::new(0);
        let merged = Mutex::new(Results::new(self.p, self.nc));
        let this = &*self;
        std::thread::scope(|s| {
            for _ in 0..threads.max(1) {
                s.spawn(|| {
                    let mut local = Results::new(this.p, this.nc);
                    let mut scratch = this.scratch();
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        let Some(unit) = units.get(i) else { break };
                        this.run_unit(t, *unit, &mut scratch, &mut local);
                    }
                    merged.lock().unwrap().merge(&local);
                });
            }
        });
        self.results.merge(&merged.into_inner().unwrap());
    }

    fn scratch(&self) -> Scratch {
        let (m, k, w, n) = (self.m, self.k, self.words[0] + self.words[1], self.n_total());
        let bits = self.strategy == Strategy::Bits;
        Scratch {
            prefix_bits: (0..k).map(|l| if bits { vec![0; m.pow(l as u32) * w] } else { Vec::new() }).collect(),
            prefix_code: (0..k).map(|_| if bits { Vec::new() } else { vec![0; n] }).collect(),
            prefix_counts: (0..k).map(|l| vec![[0; 2]; m.pow(l as u32)]).collect(),
            full: vec![[0; 2]; m.pow(k as u32)],
            reduced: vec![[0; 2]; m.pow(k as u32 - 1)],
            tuple: [u32::MAX; MAX_K],
        }
    }

    fn run_unit(&self, t: u32, unit: Unit, sc: &mut Scratch, out: &mut Results) {
        // level 0: the empty prefix holds every object
        if self.strategy == Strategy::Bits {
            sc.prefix_bits[0].copy_from_slice(&self.mask);
        } else {
            sc.prefix_code[0].fill(0);
        }
        sc.prefix_counts[0][0] = [self.n[0] as u32, self.n[1] as u32];
        sc.tuple = [u32::MAX; MAX_K];
        match unit {
            Unit::Real(i) if self.k == 1 => self.last_members(t, sc, out, i as usize..i as usize + 1, false),
            Unit::Contrast(j) if self.k == 1 => {
                self.last_members(t, sc, out, self.p + j as usize..self.p + j as usize + 1, true)
            }
            Unit::Real(i) => {
                self.extend(sc, 1, i as usize);
                self.descend(t, sc, out, 1, false);
            }
            Unit::Contrast(i) => {
                self.extend(sc, 1, i as usize);
                self.descend(t, sc, out, 1, true);
            }
        }
    }

    /// Prefix level `level` (>= 1) now holds `level` members; go on to k-1, then score.
    fn descend(&self, t: u32, sc: &mut Scratch, out: &mut Results, level: usize, contrast: bool) {
        let last = sc.tuple[level - 1] as usize;
        if level == self.k - 1 {
            let range = if contrast { self.p..self.p + self.nc } else { last + 1..self.p };
            self.last_members(t, sc, out, range, contrast);
            return;
        }
        // leave room for the members still to come (the contrast takes the last place)
        let room = self.k - 1 - level - usize::from(contrast);
        for v in last + 1..self.p.saturating_sub(room) {
            self.extend(sc, level + 1, v);
            self.descend(t, sc, out, level + 1, contrast);
        }
    }

    /// Level `level` = level-1 with variable v appended as its most significant digit.
    fn extend(&self, sc: &mut Scratch, level: usize, v: usize) {
        sc.tuple[level - 1] = v as u32;
        let m = self.m;
        let below = m.pow(level as u32 - 1);
        let counts = &mut sc.prefix_counts[level];
        if self.strategy == Strategy::Bits {
            let w = self.words[0] + self.words[1];
            let (lo, hi) = sc.prefix_bits.split_at_mut(level);
            let (prev, cur) = (&lo[level - 1], &mut hi[0]);
            let vb = &self.bits[v * m * w..(v + 1) * m * w];
            for q in 0..below {
                let pq = &prev[q * w..(q + 1) * w];
                for b in 0..m {
                    let dst = &mut cur[(q + below * b) * w..(q + below * b + 1) * w];
                    let bb = &vb[b * w..(b + 1) * w];
                    let mut c = [0u32; 2];
                    for (i, d) in dst.iter_mut().enumerate() {
                        *d = pq[i] & bb[i];
                        c[usize::from(i >= self.words[0])] += d.count_ones();
                    }
                    counts[q + below * b] = c;
                }
            }
        } else {
            let (lo, hi) = sc.prefix_code.split_at_mut(level);
            let (prev, cur) = (&lo[level - 1], &mut hi[0]);
            let bins = &self.bins[v * self.n_total()..(v + 1) * self.n_total()];
            counts.fill([0; 2]);
            for (o, (d, &b)) in cur.iter_mut().zip(bins).enumerate() {
                *d = prev[o] + below as u32 * b as u32;
                counts[*d as usize][usize::from(o >= self.n[0])] += 1;
            }
        }
    }

    /// Scores every last member in `range` against the prefix of k-1 members.
    fn last_members(&self, t: u32, sc: &mut Scratch, out: &mut Results, range: std::ops::Range<usize>, contrast: bool) {
        let k = self.k;
        let m = self.m;
        let below = m.pow(k as u32 - 1);
        // H(Y | prefix) is the entropy of the table with the last member summed out.
        let h_prefix = self.reduced.h(&sc.prefix_counts[k - 1]);
        for v in range {
            self.count_last(sc, v);
            if k == 1 {
                if contrast {
                    let j = v - self.p;
                    out.contrast[j] = out.contrast[j].max(self.exact1d.ig_contrast(&sc.full));
                } else {
                    sc.tuple[0] = v as u32;
                    out.best[v].offer(self.exact1d.ig(&sc.full), t, &sc.tuple);
                }
                continue;
            }
            let h_all = self.full.h(&sc.full);
            if contrast {
                let j = v - self.p;
                out.contrast[j] = out.contrast[j].max(h_prefix - h_all);
                continue;
            }
            sc.tuple[k - 1] = v as u32;
            out.best[v].offer(h_prefix - h_all, t, &sc.tuple);
            for j in 0..k - 1 {
                // sum member j's axis out of the full table
                let stride = m.pow(j as u32);
                for r in 0..below {
                    let base = r % stride + (r / stride) * stride * m;
                    let mut c = [0u32; 2];
                    for b in 0..m {
                        let x = sc.full[base + b * stride];
                        c[0] += x[0];
                        c[1] += x[1];
                    }
                    sc.reduced[r] = c;
                }
                let ig = self.reduced.h(&sc.reduced) - h_all;
                out.best[sc.tuple[j] as usize].offer(ig, t, &sc.tuple);
            }
        }
    }

    /// The full table of the prefix (level k-1) with column v as the last member.
    fn count_last(&self, sc: &mut Scratch, v: usize) {
        let (k, m) = (self.k, self.m);
        let below = m.pow(k as u32 - 1);
        if self.strategy == Strategy::Bits {
            let w = self.words[0] + self.words[1];
            let vb = &self.bits[v * m * w..(v + 1) * m * w];
            count_last_bits(&sc.prefix_bits[k - 1], &sc.prefix_counts[k - 1], vb, &mut sc.full, m, w, self.words[0]);
        } else {
            let n = self.n_total();
            let bins = &self.bins[v * n..(v + 1) * n];
            let code = &sc.prefix_code[k - 1];
            sc.full.fill([0; 2]);
            for c in 0..2 {
                let objects = if c == 0 { 0..self.n[0] } else { self.n[0]..n };
                for o in objects {
                    sc.full[(code[o] + below as u32 * bins[o] as u32) as usize][c] += 1;
                }
            }
        }
    }
}

fn count_last_bits(
    prefix: &[u64],
    prefix_counts: &[[u32; 2]],
    vb: &[u64],
    full: &mut [[u32; 2]],
    m: usize,
    w: usize,
    w0: usize,
) {
    #[cfg(target_arch = "x86_64")]
    if std::is_x86_feature_detected!("popcnt") {
        // SAFETY: the CPU has popcnt (checked just above).
        return unsafe { count_last_bits_popcnt(prefix, prefix_counts, vb, full, m, w, w0) };
    }
    count_last_bits_body(prefix, prefix_counts, vb, full, m, w, w0)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "popcnt")]
unsafe fn count_last_bits_popcnt(
    prefix: &[u64],
    prefix_counts: &[[u32; 2]],
    vb: &[u64],
    full: &mut [[u32; 2]],
    m: usize,
    w: usize,
    w0: usize,
) {
    count_last_bits_body(prefix, prefix_counts, vb, full, m, w, w0)
}

/// Per prefix cell: bins 0..m-2 of the last member by AND + popcount, the last bin by
/// subtraction from the prefix count; empty prefix cells stay empty without work.
#[inline(always)]
fn count_last_bits_body(
    prefix: &[u64],
    prefix_counts: &[[u32; 2]],
    vb: &[u64],
    full: &mut [[u32; 2]],
    m: usize,
    w: usize,
    w0: usize,
) {
    let below = prefix_counts.len();
    for (q, &pc) in prefix_counts.iter().enumerate() {
        if pc == [0, 0] {
            for b in 0..m {
                full[q + below * b] = [0, 0];
            }
            continue;
        }
        let pq = &prefix[q * w..(q + 1) * w];
        let mut rest = pc;
        for b in 0..m - 1 {
            let bb = &vb[b * w..(b + 1) * w];
            let c0: u32 = pq[..w0].iter().zip(&bb[..w0]).map(|(a, b)| (a & b).count_ones()).sum();
            let c1: u32 = pq[w0..].iter().zip(&bb[w0..w]).map(|(a, b)| (a & b).count_ones()).sum();
            full[q + below * b] = [c0, c1];
            rest = [rest[0] - c0, rest[1] - c1];
        }
        full[q + below * (m - 1)] = rest;
    }
}

/// Units of one discretization in the order the reference scans them, with their
/// number of tuples (the work they hold).
pub fn units(p: usize, nc: usize, k: usize) -> Vec<(Unit, u64)> {
    let choose = |n: usize, r: usize| -> u64 {
        if r > n {
            return 0;
        }
        (0..r).fold(1u64, |acc, i| acc * (n - i) as u64 / (i + 1) as u64)
    };
    let mut out: Vec<(Unit, u64)> = (0..p).map(|i| (Unit::Real(i as u32), choose(p - 1 - i, k - 1))).collect();
    if nc > 0 {
        if k == 1 {
            out.extend((0..nc).map(|j| (Unit::Contrast(j as u32), 1)));
        } else {
            out.extend((0..p).map(|i| (Unit::Contrast(i as u32), choose(p - 1 - i, k - 2) * nc as u64)));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(n: usize, p: usize) -> (Vec<Vec<f64>>, Vec<u8>) {
        let mut g = crate::mt::Mt19937::new(11);
        let y: Vec<u8> = (0..n).map(|_| (g.next_u32() % 2) as u8).collect();
        let cols = (0..p)
            .map(|v| (0..n).map(|o| (g.next_u32() % 7) as f64 + if v < 2 { y[o] as f64 * 2.0 } else { 0.0 }).collect())
            .collect();
        (cols, y)
    }

    /// Direct per-object counting with f64 entropies, no bitsets or shared prefixes.
    fn brute(a: &Analysis, t: u32) -> Vec<f64> {
        let (k, m, p) = (a.k, a.m, a.p);
        let n = a.n_total();
        let bins: Vec<Vec<u8>> = (0..p)
            .map(|v| {
                let thr = a.thresholds_of(v, t);
                a.cols[v].iter().map(|x| bin(*x, &thr)).collect()
            })
            .collect();
        let mut best = vec![f64::NEG_INFINITY; p];
        let mut tuple: Vec<usize> = (0..k).collect();
        loop {
            let mut full = vec![[0u32; 2]; m.pow(k as u32)];
            for o in 0..n {
                let cell: usize = (0..k).map(|j| bins[tuple[j]][o] as usize * m.pow(j as u32)).sum();
                full[cell][usize::from(o >= a.n[0])] += 1;
            }
            let h = a.full.h(&full);
            for j in 0..k {
                let mut red = vec![[0u32; 2]; m.pow(k as u32 - 1)];
                for (c, x) in full.iter().enumerate() {
                    let s = m.pow(j as u32);
                    let r = c % s + (c / (s * m)) * s;
                    red[r][0] += x[0];
                    red[r][1] += x[1];
                }
                let ig = a.reduced.h(&red) - h;
                best[tuple[j]] = best[tuple[j]].max(ig);
            }
            // next combination
            let mut i = k;
            while i > 0 && tuple[i - 1] == p - k + i - 1 {
                i -= 1;
            }
            if i == 0 {
                return best;
            }
            tuple[i - 1] += 1;
            for j in i..k {
                tuple[j] = tuple[j - 1] + 1;
            }
        }
    }

    #[test]
    fn both_strategies_equal_brute_force_counting() {
        let (cols, y) = data(300, 9);
        for (k, d) in [(1, 1), (2, 1), (2, 4), (3, 1), (3, 2), (4, 1)] {
            for strategy in [Strategy::Bits, Strategy::Objects] {
                let mut a = Analysis::new(cols.clone(), 9, &y, k, d, 0.25, 5, 0.5).unwrap();
                a.strategy = strategy;
                let units: Vec<Unit> = units(9, 0, k).into_iter().map(|u| u.0).collect();
                a.run(1, &units, 3);
                let want = brute(&a, 1);
                // 1D rounds to f32 as the reference does: ~3e-5 per step at H ~ 300 bits x objects
                let tol = if k == 1 { 1e-3 } else { 1e-9 };
                for (v, w) in want.iter().enumerate().take(9) {
                    assert!((a.results.best[v].ig - w).abs() < tol, "k={k} d={d} v={v}");
                }
            }
        }
    }

    #[test]
    fn result_does_not_depend_on_threads_or_unit_order() {
        let (cols, y) = data(200, 12);
        let all: Vec<Unit> = units(12, 0, 3).into_iter().map(|u| u.0).collect();
        let mut one = Analysis::new(cols.clone(), 12, &y, 3, 1, 0.25, 0, 0.7).unwrap();
        one.run(0, &all, 1);
        let mut many = Analysis::new(cols, 12, &y, 3, 1, 0.25, 0, 0.7).unwrap();
        let rev: Vec<Unit> = all.iter().rev().copied().collect();
        many.run(0, &rev[..5], 4);
        many.run(0, &rev[5..], 2);
        for v in 0..12 {
            let (a, b) = (one.results.best[v], many.results.best[v]);
            assert_eq!((a.ig, a.t, a.tuple), (b.ig, b.t, b.tuple));
        }
    }

    #[test]
    fn unit_weights_sum_to_all_tuples() {
        let total: u64 = units(50, 50, 3).iter().map(|u| u.1).sum();
        assert_eq!(total, 19600 + 1225 * 50);
    }
}

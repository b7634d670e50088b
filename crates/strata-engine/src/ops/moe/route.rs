//! Route: the router's choice of experts for every token, and those choices grouped by
//! expert so each expert's weights are read once per run.
//!
//! Source: llama.cpp `llm_graph_context::build_moe_ffn` (`src/llama-graph.cpp`) with
//! `LLAMA_EXPERT_GATING_FUNC_TYPE_SOFTMAX`; ggml `mul_mat_id`'s grouping of rows by expert.

use std::ops::Range;

/// Softmax of `logits` in place, then the `ids.len()` largest probabilities (descending;
/// ties keep the lower id) into `ids`/`weights`, divided by their sum when `norm`.
///
/// The sum is clamped below at 6.103515625e-5 (the smallest normal f16), as llama.cpp does.
pub fn route(logits: &mut [f32], norm: bool, ids: &mut [usize], weights: &mut [f32]) {
    let max = logits.iter().cloned().fold(f32::NEG_INFINITY, f32::max);
    let mut sum = 0.0f64;
    for l in logits.iter_mut() {
        *l = (*l - max).exp();
        sum += *l as f64;
    }
    let inv = (1.0 / sum) as f32;
    logits.iter_mut().for_each(|l| *l *= inv);
    // One pass: the best so far kept sorted (probability descending, then id ascending:
    // an expert goes after every kept one it does not beat, so of equal probabilities the
    // lower id, seen first, stays ahead), as `ids.len()` passes of "best unused" would pick.
    let k = ids.len();
    if k == 0 {
        return;
    }
    let mut taken = 0;
    for (e, &p) in logits.iter().enumerate() {
        // NaN beats nothing: it only fills a list not yet full.
        let beats_last = p > weights[k - 1];
        if taken == k && !beats_last {
            continue;
        }
        let at = weights[..taken]
            .iter()
            .position(|&q| p > q)
            .unwrap_or(taken);
        let end = taken.min(k - 1);
        ids.copy_within(at..end, at + 1);
        weights.copy_within(at..end, at + 1);
        ids[at] = e;
        weights[at] = p;
        taken = (taken + 1).min(k);
    }
    if norm && taken > 0 {
        let s = weights.iter().sum::<f32>().max(6.103_515_6e-5);
        weights.iter_mut().for_each(|w| *w /= s);
    }
}

/// The routing of a run of `T` tokens: `(layer's) expert id, weight` for each of the
/// `n_used` slots of every token, best first — slot `t·n_used + j` is token t's j-th choice.
#[derive(Default)]
pub struct Routing {
    /// `[T][n_used]` expert ids.
    pub ids: Vec<usize>,
    /// `[T][n_used]` weights of those experts in the sum.
    pub weights: Vec<f32>,
    pub n_used: usize,
}

impl Routing {
    /// Routes every row of `probs` (`[T][n_expert]` router logits, turned into probabilities
    /// in place) to its `n_used` best experts, see [`route`].
    pub fn fill(&mut self, probs: &mut [f32], n_expert: usize, n_used: usize, norm: bool) {
        let t_n = probs.len() / n_expert;
        self.n_used = n_used;
        self.ids.resize(t_n * n_used, 0);
        self.weights.resize(t_n * n_used, 0.0);
        let rows = probs.chunks_exact_mut(n_expert);
        let ids = self.ids.chunks_exact_mut(n_used);
        for ((p, ids), w) in rows.zip(ids).zip(self.weights.chunks_exact_mut(n_used)) {
            route(p, norm, ids, w);
        }
    }
}

/// The `R = T·n_used` slots of a [`Routing`] ordered by expert, then slot: the rows of one
/// expert are consecutive (`ggml`'s `mul_mat_id` grouping).
#[derive(Default)]
pub struct Groups {
    /// `order[pos]`: the slot at group-order position `pos`.
    pub order: Vec<usize>,
    /// `pos_of[slot]`: inverse of `order`.
    pub pos_of: Vec<usize>,
    /// (expert, positions) of every expert that got a row, experts ascending.
    pub spans: Vec<(usize, Range<usize>)>,
    /// Counting-sort scratch `[n_expert + 1]`.
    count: Vec<usize>,
}

impl Groups {
    /// Groups the slots of `ids` (expert ids below `n_expert`).
    pub fn build(&mut self, ids: &[usize], n_expert: usize) {
        self.order.clear();
        self.spans.clear();
        // Counting sort by expert; slots stay ascending within an expert.
        let count = &mut self.count;
        count.clear();
        count.resize(n_expert + 1, 0);
        ids.iter().for_each(|e| count[e + 1] += 1);
        for e in 0..n_expert {
            count[e + 1] += count[e];
            if count[e + 1] > count[e] {
                self.spans.push((e, count[e]..count[e + 1]));
            }
        }
        self.order.resize(ids.len(), 0);
        self.pos_of.resize(ids.len(), 0);
        for (slot, e) in ids.iter().enumerate() {
            self.order[count[*e]] = slot;
            self.pos_of[slot] = count[*e];
            count[*e] += 1;
        }
    }
}

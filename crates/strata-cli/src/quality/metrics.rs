//! Per-position comparison of two next-token distributions and its summary — the numbers of
//! llama.cpp's `llama-perplexity --kl-divergence`: KL(reference ‖ ours), same top token,
//! Δp of the correct token, and the perplexity of each side. Computed in f64.

use serde::Serialize;

/// How two logit rows compare at one position whose correct next token is known.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PosStats {
    /// KL(P_ref ‖ P_ours) in nats.
    pub kl: f64,
    /// Whether both rows have the same arg-max token (the first, on ties).
    pub same_top: bool,
    /// Probability of the correct token under the reference.
    pub p_ref: f64,
    /// Probability of the correct token under ours.
    pub p_ours: f64,
}

/// `log_softmax(row)` in f64.
pub fn log_softmax(row: &[f32]) -> Vec<f64> {
    let max = row.iter().fold(f64::NEG_INFINITY, |m, &x| m.max(x as f64));
    let sum: f64 = row.iter().map(|&x| (x as f64 - max).exp()).sum();
    let lse = max + sum.ln();
    row.iter().map(|&x| x as f64 - lse).collect()
}

fn argmax(row: &[f32]) -> usize {
    let mut best = 0;
    for (i, &x) in row.iter().enumerate() {
        if x > row[best] {
            best = i;
        }
    }
    best
}

/// Compares the reference row with ours (same length, logits) at a position whose correct
/// next token is `target`.
pub fn compare(reference: &[f32], ours: &[f32], target: usize) -> PosStats {
    debug_assert_eq!(reference.len(), ours.len());
    let lp = log_softmax(reference);
    let lq = log_softmax(ours);
    let kl = lp
        .iter()
        .zip(&lq)
        .map(|(&a, &b)| {
            let p = a.exp();
            if p > 0.0 {
                p * (a - b)
            } else {
                0.0
            }
        })
        .sum::<f64>()
        .max(0.0);
    PosStats {
        kl,
        same_top: argmax(reference) == argmax(ours),
        p_ref: lp[target].exp(),
        p_ours: lq[target].exp(),
    }
}

/// The summary over all scored positions.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Summary {
    /// Positions compared.
    pub positions: usize,
    /// Share of positions with the same top token, in percent.
    pub same_top_pct: f64,
    /// Mean KL(reference ‖ ours), nats.
    pub kl_mean: f64,
    /// Median KL.
    pub kl_median: f64,
    /// 99th percentile of KL (nearest rank).
    pub kl_p99: f64,
    /// Largest KL.
    pub kl_max: f64,
    /// Mean of p_ours − p_ref of the correct token, in percentage points.
    pub delta_p_mean_pct: f64,
    /// Root mean square of that difference, in percentage points.
    pub delta_p_rms_pct: f64,
    /// Perplexity of ours: exp(mean −ln p_ours).
    pub ppl_ours: f64,
    /// Perplexity of the reference.
    pub ppl_reference: f64,
}

impl Summary {
    /// Summarizes `stats` (all zero when empty).
    pub fn of(stats: &[PosStats]) -> Summary {
        let n = stats.len();
        if n == 0 {
            return Summary::default();
        }
        let nf = n as f64;
        let mut kls: Vec<f64> = stats.iter().map(|s| s.kl).collect();
        kls.sort_by(|a, b| a.total_cmp(b));
        let rank = |q: f64| kls[((q * nf).ceil() as usize).clamp(1, n) - 1];
        let median = if n % 2 == 1 {
            kls[n / 2]
        } else {
            (kls[n / 2 - 1] + kls[n / 2]) / 2.0
        };
        let dps: Vec<f64> = stats.iter().map(|s| s.p_ours - s.p_ref).collect();
        let nll = |p: f64| -p.max(f64::MIN_POSITIVE).ln();
        Summary {
            positions: n,
            same_top_pct: 100.0 * stats.iter().filter(|s| s.same_top).count() as f64 / nf,
            kl_mean: kls.iter().sum::<f64>() / nf,
            kl_median: median,
            kl_p99: rank(0.99),
            kl_max: kls[n - 1],
            delta_p_mean_pct: 100.0 * dps.iter().sum::<f64>() / nf,
            delta_p_rms_pct: 100.0 * (dps.iter().map(|d| d * d).sum::<f64>() / nf).sqrt(),
            ppl_ours: (stats.iter().map(|s| nll(s.p_ours)).sum::<f64>() / nf).exp(),
            ppl_reference: (stats.iter().map(|s| nll(s.p_ref)).sum::<f64>() / nf).exp(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identical_rows_have_zero_kl_and_the_same_top() {
        let row = [1.0f32, 3.0, -2.0, 0.5];
        let s = compare(&row, &row, 1);
        assert_eq!(s.kl, 0.0);
        assert!(s.same_top);
        assert_eq!(s.p_ref, s.p_ours);
        let sum = Summary::of(&[s, s]);
        assert_eq!(
            (sum.same_top_pct, sum.kl_max, sum.delta_p_rms_pct),
            (100.0, 0.0, 0.0)
        );
        assert!((sum.ppl_ours - 1.0 / s.p_ref).abs() < 1e-9);
    }

    #[test]
    fn kl_of_two_coins_matches_the_closed_form() {
        // P = (0.5, 0.5), Q = (0.8, 0.2): KL = 0.5 ln(0.5/0.8) + 0.5 ln(0.5/0.2).
        let p = [0.0f32, 0.0];
        let q = [(0.8f32).ln(), (0.2f32).ln()];
        let s = compare(&p, &q, 0);
        let want = 0.5 * (0.5f64 / 0.8).ln() + 0.5 * (0.5f64 / 0.2).ln();
        assert!((s.kl - want).abs() < 1e-7, "{} vs {want}", s.kl);
        assert!(s.same_top, "ties pick the first token on both sides");
        assert!((s.p_ours - 0.8).abs() < 1e-6);
    }

    #[test]
    fn percentiles_use_nearest_rank() {
        let stats: Vec<PosStats> = (1..=200)
            .map(|i| PosStats {
                kl: i as f64,
                same_top: i % 2 == 0,
                p_ref: 0.5,
                p_ours: 0.25,
            })
            .collect();
        let s = Summary::of(&stats);
        assert_eq!((s.kl_p99, s.kl_max, s.kl_median), (198.0, 200.0, 100.5));
        assert_eq!(s.same_top_pct, 50.0);
        assert!((s.delta_p_mean_pct + 25.0).abs() < 1e-9);
        assert!((s.ppl_ours - 4.0).abs() < 1e-9 && (s.ppl_reference - 2.0).abs() < 1e-9);
    }
}

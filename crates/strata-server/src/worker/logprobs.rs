//! Log-probabilities of generated tokens under the model's raw distribution (log-softmax of the
//! logits before any sampling filter), with the most likely alternatives.

/// One generated token's log-probability and its top alternatives.
#[derive(Debug, Clone, PartialEq)]
pub struct TokenLogprob {
    /// The token's text (bytes decoded lossily).
    pub token: String,
    /// The token's bytes.
    pub bytes: Vec<u8>,
    /// Natural-log probability.
    pub logprob: f32,
    /// The `n` most likely tokens at this position: (text, bytes, logprob), best first.
    pub top: Vec<(String, Vec<u8>, f32)>,
}

/// `log(sum(exp(logits)))`, computed stably.
fn log_sum_exp(logits: &[f32]) -> f32 {
    let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let sum: f64 = logits.iter().map(|l| ((l - max) as f64).exp()).sum();
    max + sum.ln() as f32
}

/// The log-probability of `chosen` and the ids and log-probabilities of the `n` most likely
/// tokens (best first, ties by id).
pub fn logprobs(logits: &[f32], chosen: u32, n: usize) -> (f32, Vec<(u32, f32)>) {
    let lse = log_sum_exp(logits);
    let lp = logits
        .get(chosen as usize)
        .map_or(f32::NEG_INFINITY, |l| l - lse);
    let mut top: Vec<(u32, f32)> = Vec::with_capacity(n + 1);
    for (i, &l) in logits.iter().enumerate() {
        if top.len() == n && top.last().is_some_and(|t| l <= t.1) {
            continue;
        }
        let at = top.partition_point(|t| t.1 >= l);
        top.insert(at, (i as u32, l));
        top.truncate(n);
    }
    (lp, top.into_iter().map(|(i, l)| (i, l - lse)).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn logprobs_normalize_and_rank() {
        let logits = [0.0f32, 2.0, 1.0, 2.0];
        let (lp, top) = logprobs(&logits, 2, 3);
        let total: f32 = logits
            .iter()
            .map(|l| (l - log_sum_exp(&logits)).exp())
            .sum();
        assert!((total - 1.0).abs() < 1e-5);
        assert!((lp - (1.0 - log_sum_exp(&logits))).abs() < 1e-6);
        assert_eq!(top.iter().map(|t| t.0).collect::<Vec<_>>(), vec![1, 3, 2]);
        assert!(logprobs(&logits, 0, 0).1.is_empty());
    }
}

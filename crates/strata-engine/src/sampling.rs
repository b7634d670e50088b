//! Token sampling: penalties, then top-k, top-p, min-p, temperature, and a seeded draw —
//! the order of llama.cpp's default sampler chain (`common/sampling.cpp`).

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha20Rng;

/// Sampling settings. `temperature <= 0` is greedy (argmax after penalties).
#[derive(Clone, Debug, PartialEq)]
pub struct SamplingParams {
    pub temperature: f32,
    /// Keep the k most likely tokens (0 = all).
    pub top_k: usize,
    /// Keep the smallest set whose probability reaches p (1.0 = all).
    pub top_p: f32,
    /// Drop tokens below `min_p` × the top probability (0 = off).
    pub min_p: f32,
    /// Divide positive / multiply negative logits of recent tokens (1.0 = off; CTRL, Keskar 2019).
    pub repeat_penalty: f32,
    /// Subtract once per recent token that occurred (OpenAI `presence_penalty`).
    pub presence_penalty: f32,
    /// Subtract per occurrence among recent tokens (OpenAI `frequency_penalty`).
    pub frequency_penalty: f32,
    /// How many recent tokens the penalties look at (llama.cpp `--repeat-last-n`).
    pub penalty_last_n: usize,
    /// Seed of the random draw: the same seed gives the same output.
    pub seed: u64,
}

impl Default for SamplingParams {
    /// llama.cpp's defaults: temperature 0.8, top-k 40, top-p 0.95, min-p 0.05, no penalties.
    fn default() -> Self {
        SamplingParams {
            temperature: 0.8,
            top_k: 40,
            top_p: 0.95,
            min_p: 0.05,
            repeat_penalty: 1.0,
            presence_penalty: 0.0,
            frequency_penalty: 0.0,
            penalty_last_n: 64,
            seed: 0xC0FFEE,
        }
    }
}

impl SamplingParams {
    /// Greedy decoding: argmax, no penalties.
    pub fn greedy() -> Self {
        SamplingParams {
            temperature: 0.0,
            repeat_penalty: 1.0,
            ..Self::default()
        }
    }
}

/// A sampler with its random state and candidate buffer (reused: no allocation per token).
pub struct Sampler {
    params: SamplingParams,
    rng: ChaCha20Rng,
    candidates: Vec<(u32, f32)>,
    counts: Vec<(u32, u32)>,
}

impl Sampler {
    /// A sampler seeded with `params.seed`.
    pub fn new(params: SamplingParams) -> Sampler {
        let rng = ChaCha20Rng::seed_from_u64(params.seed);
        Sampler {
            params,
            rng,
            candidates: Vec::new(),
            counts: Vec::new(),
        }
    }

    /// The settings.
    pub fn params(&self) -> &SamplingParams {
        &self.params
    }

    /// Picks the next token from `logits` (`n_vocab`), given the tokens so far in `history`.
    pub fn sample(&mut self, logits: &[f32], history: &[u32]) -> u32 {
        let p = self.params.clone();
        self.candidates.clear();
        self.candidates
            .extend(logits.iter().enumerate().map(|(i, l)| (i as u32, *l)));
        self.apply_penalties(history);
        let c = &mut self.candidates;
        if p.temperature <= 0.0 {
            return argmax(c);
        }
        // Sort descending; ties broken by id so results do not depend on sort stability.
        c.sort_unstable_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        if p.top_k > 0 && p.top_k < c.len() {
            c.truncate(p.top_k);
        }
        let probs = softmax_sorted(c, 1.0);
        let mut keep = c.len();
        if p.top_p < 1.0 {
            let mut cum = 0.0;
            for (i, pr) in probs.iter().enumerate() {
                cum += pr;
                if cum >= p.top_p {
                    keep = i + 1;
                    break;
                }
            }
        }
        if p.min_p > 0.0 {
            let floor = probs[0] * p.min_p;
            keep = keep.min(probs.iter().take_while(|pr| **pr >= floor).count().max(1));
        }
        c.truncate(keep);
        let probs = softmax_sorted(c, p.temperature);
        let r: f64 = self.rng.gen();
        let mut cum = 0.0f64;
        for (i, pr) in probs.iter().enumerate() {
            cum += *pr as f64;
            if r < cum {
                return c[i].0;
            }
        }
        c[c.len() - 1].0
    }

    fn apply_penalties(&mut self, history: &[u32]) {
        let p = &self.params;
        if p.repeat_penalty == 1.0 && p.presence_penalty == 0.0 && p.frequency_penalty == 0.0 {
            return;
        }
        let recent = &history[history.len().saturating_sub(p.penalty_last_n)..];
        self.counts.clear();
        for t in recent {
            match self.counts.iter_mut().find(|(id, _)| id == t) {
                Some(e) => e.1 += 1,
                None => self.counts.push((*t, 1)),
            }
        }
        for (id, n) in &self.counts {
            let Some(l) = self.candidates.get_mut(*id as usize) else {
                continue;
            };
            if l.1 > 0.0 {
                l.1 /= p.repeat_penalty;
            } else {
                l.1 *= p.repeat_penalty;
            }
            l.1 -= *n as f32 * p.frequency_penalty + p.presence_penalty;
        }
    }
}

/// Index of the largest logit (the lowest id among equals).
pub fn argmax_logits(logits: &[f32]) -> u32 {
    let mut best = 0;
    for (i, l) in logits.iter().enumerate() {
        if *l > logits[best] {
            best = i;
        }
    }
    best as u32
}

fn argmax(c: &[(u32, f32)]) -> u32 {
    let mut best = 0;
    for (i, (_, l)) in c.iter().enumerate() {
        if *l > c[best].1 {
            best = i;
        }
    }
    c[best].0
}

/// Softmax of logits sorted descending, at temperature `temp`.
fn softmax_sorted(c: &[(u32, f32)], temp: f32) -> Vec<f32> {
    let max = c[0].1;
    let mut probs: Vec<f32> = c.iter().map(|(_, l)| ((l - max) / temp).exp()).collect();
    let sum: f32 = probs.iter().sum();
    probs.iter_mut().for_each(|p| *p /= sum);
    probs
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn greedy_picks_argmax_and_penalty_can_change_it() {
        let logits = [0.1f32, 2.0, 1.9, -1.0];
        let mut s = Sampler::new(SamplingParams::greedy());
        assert_eq!(s.sample(&logits, &[]), 1);
        let mut p = SamplingParams::greedy();
        p.repeat_penalty = 1.5;
        let mut s = Sampler::new(p);
        assert_eq!(s.sample(&logits, &[1]), 2);
    }

    #[test]
    fn same_seed_same_tokens_and_filters_restrict_support() {
        let logits: Vec<f32> = (0..50).map(|i| (i as f32 * 0.37).sin() * 3.0).collect();
        let params = SamplingParams {
            temperature: 1.0,
            top_k: 0,
            top_p: 1.0,
            min_p: 0.0,
            ..Default::default()
        };
        let run = |p: &SamplingParams| {
            let mut s = Sampler::new(p.clone());
            (0..200).map(|_| s.sample(&logits, &[])).collect::<Vec<_>>()
        };
        assert_eq!(run(&params), run(&params));
        let other = SamplingParams {
            seed: 7,
            ..params.clone()
        };
        assert_ne!(run(&params), run(&other));
        let top3 = SamplingParams {
            top_k: 3,
            ..params.clone()
        };
        let mut sorted: Vec<u32> = (0..50).collect();
        sorted.sort_by(|a, b| logits[*b as usize].total_cmp(&logits[*a as usize]));
        assert!(run(&top3).iter().all(|t| sorted[..3].contains(t)));
        // min-p keeps exactly the tokens whose probability is ≥ min_p × the top one.
        let minp = SamplingParams {
            min_p: 0.9,
            ..params
        };
        let top = logits[sorted[0] as usize];
        let allowed: Vec<u32> = (0..50)
            .filter(|i| (logits[*i as usize] - top).exp() >= 0.9)
            .collect();
        let drawn = run(&minp);
        assert!(
            drawn.iter().all(|t| allowed.contains(t)),
            "{allowed:?} {drawn:?}"
        );
        assert!(
            allowed.iter().all(|t| drawn.contains(t)),
            "200 draws cover {allowed:?}"
        );
    }
}

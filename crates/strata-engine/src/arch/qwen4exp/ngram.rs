//! PLE's n-gram hash (`Qwen4ExpTextNGramEmbedding`: `_shift_right_ignore_eos`, `forward`;
//! llama.cpp `llm_graph_input_qwen4exp_ple::set_input`): the table rows of the n-grams that
//! end at each token.
//!
//! The window of the token `t_p` is `c_0 = t_p` and, for `s = 1 .. n−1`, `c_s = t_{p−s}`
//! unless one of `t_{p−s} .. t_{p−1}` is EOS or `p − s < 0`, when it is EOS: an EOS cuts every
//! n-gram reaching across it, but not its own. Order `k` (2..=n) hashes
//! `(c_0·m_0) ⊕ … ⊕ (c_{k−1}·m_{k−1})` (u64), and its head `g` reads row
//! `hash mod V_h + off_h`, `h = (k−2)·heads_per_ngram + g`.

use crate::config::PleConfig;
use crate::recurrent_state::PleState;

/// Appends the `n_heads` table rows of each of `tokens` (head 0 first) to `rows`, continuing
/// the sequence's window `st` (the previous `n − 1` tokens), which then holds the last ones.
pub(super) fn hashed_rows(p: &PleConfig, st: &mut PleState, tokens: &[u32], rows: &mut Vec<u32>) {
    let n = p.ngram;
    for &tok in tokens {
        let c0 = u64::from(tok);
        let mut mixed = c0.wrapping_mul(p.multipliers[0]);
        let mut cut = false;
        // c_{k-1} = t_{p-k+1}: the window's entries newest first.
        for (k, &prev) in (2..=n).zip(st.tokens.iter().rev()) {
            cut |= prev == p.eos;
            let c = if cut { p.eos } else { prev };
            mixed ^= c.wrapping_mul(p.multipliers[k - 1]);
            for g in 0..p.heads_per_ngram {
                let h = (k - 2) * p.heads_per_ngram + g;
                // Below the table's row count, which the configuration bounds by u32.
                rows.push((mixed % p.vocab_sizes[h] + p.offsets[h]) as u32);
            }
        }
        st.tokens.rotate_left(1);
        st.tokens[n - 2] = c0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg() -> PleConfig {
        PleConfig {
            layer: 1,
            ngram: 3,
            heads_per_ngram: 2,
            conv_kernel: 4,
            eos: 9,
            multipliers: vec![3, 5, 7],
            offsets: vec![0, 11, 24, 41],
            vocab_sizes: vec![11, 13, 17, 19],
            row: 4,
            n_rows: 128,
        }
    }

    /// The rows of one token given its window `c`, straight from the formula.
    fn rows_of(p: &PleConfig, c: [u64; 3]) -> Vec<u32> {
        let h2 = (c[0] * 3) ^ (c[1] * 5);
        let h3 = h2 ^ (c[2] * 7);
        let mut out = Vec::new();
        for (i, hash) in [h2, h2, h3, h3].into_iter().enumerate() {
            out.push((hash % p.vocab_sizes[i] + p.offsets[i]) as u32);
        }
        out
    }

    #[test]
    fn eos_cuts_the_ngrams_that_reach_across_it_and_calls_continue_the_window() {
        let p = cfg();
        let toks = [4u32, 6, 9, 2, 8, 5];
        let mut want = Vec::new();
        // Windows (c0, c1, c2): the start reads EOS; the EOS at 2 keeps its own context and
        // cuts it for 2 and 8.
        for c in [
            [4, 9, 9],
            [6, 4, 9],
            [9, 6, 4],
            [2, 9, 9],
            [8, 2, 9],
            [5, 8, 2],
        ] {
            want.extend(rows_of(&p, c));
        }
        let mut st = PleState::new(&p, 1);
        let mut all = Vec::new();
        hashed_rows(&p, &mut st, &toks, &mut all);
        assert_eq!(all, want);
        let mut st = PleState::new(&p, 1);
        let mut pieces = Vec::new();
        for part in [&toks[..1], &toks[1..4], &toks[4..]] {
            hashed_rows(&p, &mut st, part, &mut pieces);
        }
        assert_eq!(pieces, want);
        assert_eq!(st.tokens, [8, 5]);
    }
}

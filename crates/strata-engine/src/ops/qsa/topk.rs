//! Which `k` of `n` scored blocks `torch.topk` keeps, ties included.
//!
//! The indexer's block scores are sums of ReLUs, so blocks that no head likes all score
//! exactly 0 and the budget often cuts through such a tie. Which of the tied blocks a query
//! keeps is then an artifact of the selection algorithm, and it changes the attention output
//! (by 0.4 on the tiny model). transformers (the reference) runs `scores.topk(k)` on the CPU:
//! PyTorch's `topk_impl_loop` (`aten/src/ATen/native/TopKImpl.h`) fills a queue of
//! (score, index) pairs in index order and, with the comparator "larger score first" (NaN
//! first), calls `std::partial_sort` when `64·k ≤ n`, else `std::nth_element`; the first `k`
//! queue entries are the kept set. This module replays those two calls step for step as
//! libstdc++ implements them (`bits/stl_algo.h`: introselect with median-of-three pivots,
//! insertion sort below 4 elements, heap select; `bits/stl_heap.h`), so the kept set is the
//! reference's bit for bit. Scripts check: 20,000 random tie-heavy cases (n ≤ 700, both
//! paths) against `torch.topk` (torch 2.11) agreed on every kept set.

/// A scored block: (score, block index).
pub type Scored = (f32, usize);

/// Reorders `a` so that its first `k` entries (in no useful order) are the ones
/// `torch.topk(scores, k)` returns on the CPU, `scores[i] = a[i].0` in the original order.
pub fn torch_topk(a: &mut [Scored], k: usize) {
    let n = a.len();
    if k == 0 || k >= n {
        return;
    }
    if k * 64 <= n {
        heap_select(a, k);
    } else {
        let depth = 2 * n.ilog2() as usize;
        introselect(a, k - 1, depth);
    }
}

/// libstdc++'s `_Iter_comp_iter` of PyTorch's comparator: `x` goes before `y`.
#[inline]
fn before(x: &Scored, y: &Scored) -> bool {
    (x.0.is_nan() && !y.0.is_nan()) || x.0 > y.0
}

/// `std::__introselect(first, nth, last, depth)` on all of `a`.
fn introselect(a: &mut [Scored], nth: usize, mut depth: usize) {
    let (mut first, mut last) = (0, a.len());
    while last - first > 3 {
        if depth == 0 {
            heap_select(&mut a[first..last], nth + 1 - first);
            a.swap(first, nth);
            return;
        }
        depth -= 1;
        let mid = first + (last - first) / 2;
        move_median_to_first(a, first, first + 1, mid, last - 1);
        let cut = unguarded_partition(a, first + 1, last, first);
        if cut <= nth {
            first = cut;
        } else {
            last = cut;
        }
    }
    insertion_sort(&mut a[first..last]);
}

/// `std::__move_median_to_first(result, a, b, c)`.
fn move_median_to_first(v: &mut [Scored], r: usize, a: usize, b: usize, c: usize) {
    let pick = if before(&v[a], &v[b]) {
        if before(&v[b], &v[c]) {
            b
        } else if before(&v[a], &v[c]) {
            c
        } else {
            a
        }
    } else if before(&v[a], &v[c]) {
        a
    } else if before(&v[b], &v[c]) {
        c
    } else {
        b
    };
    v.swap(r, pick);
}

/// `std::__unguarded_partition(first, last, pivot)`: the pivot stays at `pivot`.
fn unguarded_partition(v: &mut [Scored], mut first: usize, mut last: usize, pivot: usize) -> usize {
    loop {
        while before(&v[first], &v[pivot]) {
            first += 1;
        }
        last -= 1;
        while before(&v[pivot], &v[last]) {
            last -= 1;
        }
        if first >= last {
            return first;
        }
        v.swap(first, last);
        first += 1;
    }
}

/// `std::__insertion_sort`.
fn insertion_sort(v: &mut [Scored]) {
    for i in 1..v.len() {
        let x = v[i];
        if before(&x, &v[0]) {
            v.copy_within(0..i, 1);
            v[0] = x;
        } else {
            let mut j = i;
            while before(&x, &v[j - 1]) {
                v[j] = v[j - 1];
                j -= 1;
            }
            v[j] = x;
        }
    }
}

/// `std::__heap_select(first, first + m, last)`: a heap of the first `m` (its top the
/// "worst" kept), every later entry that goes before the top replacing it.
fn heap_select(v: &mut [Scored], m: usize) {
    make_heap(&mut v[..m]);
    for i in m..v.len() {
        if before(&v[i], &v[0]) {
            let x = v[i];
            v[i] = v[0];
            adjust_heap(&mut v[..m], 0, x);
        }
    }
}

/// `std::__make_heap`.
fn make_heap(v: &mut [Scored]) {
    let n = v.len();
    if n < 2 {
        return;
    }
    for parent in (0..=(n - 2) / 2).rev() {
        let x = v[parent];
        adjust_heap(v, parent, x);
    }
}

/// `std::__adjust_heap(first, hole, len, value)` then `std::__push_heap`.
fn adjust_heap(v: &mut [Scored], mut hole: usize, x: Scored) {
    let (len, top) = (v.len(), hole);
    let mut second = hole;
    while second < len.saturating_sub(1) / 2 {
        second = 2 * (second + 1);
        if before(&v[second], &v[second - 1]) {
            second -= 1;
        }
        v[hole] = v[second];
        hole = second;
    }
    if len % 2 == 0 && second == (len - 2) / 2 {
        second = 2 * (second + 1);
        v[hole] = v[second - 1];
        hole = second - 1;
    }
    while hole > top {
        let parent = (hole - 1) / 2;
        if !before(&v[parent], &x) {
            break;
        }
        v[hole] = v[parent];
        hole = parent;
    }
    v[hole] = x;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kept(scores: &[f32], k: usize) -> Vec<usize> {
        let mut a: Vec<Scored> = scores.iter().copied().zip(0..).collect();
        torch_topk(&mut a, k);
        let mut ids: Vec<usize> = a[..k].iter().map(|x| x.1).collect();
        ids.sort();
        ids
    }

    #[test]
    fn ties_break_as_torch_topk_does() {
        // The tiny model's first sparse query: torch keeps blocks 1–4, dropping block 0.
        assert_eq!(kept(&[0.0, 0.74, 0.0, 0.23, 2.06], 4), [1, 2, 3, 4]);
        // Cases computed with torch 2.11 `torch.tensor(v).topk(k).indices` (sorted):
        // nth_element path
        assert_eq!(kept(&[0.0; 8], 3), [4, 5, 6]);
        assert_eq!(
            kept(&[1.0, 0.0, 1.0, 0.0, 1.0, 0.0, 1.0, 0.0, 0.0], 6),
            [0, 2, 4, 6, 7, 8]
        );
        // partial_sort path (64·k ≤ n)
        let mut v = vec![0.0f32; 130];
        v[5] = 1.0;
        assert_eq!(kept(&v, 2), [0, 5]);
    }

    #[test]
    fn distinct_scores_keep_the_k_largest() {
        let scores: Vec<f32> = (0..300).map(|i| ((i * 37) % 300) as f32).collect();
        for k in [1, 3, 4, 5, 50, 299] {
            let mut want: Vec<usize> = (0..300).collect();
            want.sort_by(|a, b| scores[*b].total_cmp(&scores[*a]));
            let mut want = want[..k].to_vec();
            want.sort();
            assert_eq!(kept(&scores, k), want, "k={k}");
        }
    }
}

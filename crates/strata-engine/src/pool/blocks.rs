//! A buffer that pool tasks fill in disjoint ranges of their own choosing, when the pieces are
//! not the equal rectangles of [`super::Tiles`]: groups of heads (the delta rule), the
//! variable-size `[tokens][rows]` blocks of grouped expert matmuls.

use std::marker::PhantomData;
use std::ops::Range;

/// A `&mut [T]` shared by the tasks of one pool run, each of which takes a range no other task
/// takes.
pub struct Blocks<'a, T> {
    ptr: *mut T,
    len: usize,
    _buf: PhantomData<&'a mut [T]>,
}

// SAFETY: a Blocks is a `&mut [T]` whose disjoint ranges go to different tasks, which is like
// sending each task its own `&mut` piece; that needs T: Send.
unsafe impl<T: Send> Sync for Blocks<'_, T> {}

impl<'a, T> Blocks<'a, T> {
    /// Shares `buf` for one pool run.
    pub fn new(buf: &'a mut [T]) -> Self {
        Blocks {
            ptr: buf.as_mut_ptr(),
            len: buf.len(),
            _buf: PhantomData,
        }
    }

    /// Elements `r` of the buffer. Panics if `r` is out of bounds.
    ///
    /// # Safety
    /// While the returned slice lives, no other call may return an overlapping range (e.g.
    /// each task takes the range of its own task index, and those ranges are disjoint).
    #[allow(clippy::mut_from_ref)]
    pub unsafe fn get(&self, r: Range<usize>) -> &mut [T] {
        assert!(
            r.start <= r.end && r.end <= self.len,
            "block {r:?} outside a buffer of {}",
            self.len
        );
        // SAFETY: in bounds (checked); the caller keeps ranges of live slices disjoint.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.add(r.start), r.len()) }
    }
}

//! The last guard against aborting: the system allocator, except that a failed allocation
//! ends the process with one `error:` line and exit code 1 instead of Rust's abort.
//!
//! Sessions and buffers are sized before they are made ([`crate::memory`]); this catches what
//! those checks miss. It formats into a stack buffer, since the heap just said no.

use std::alloc::{GlobalAlloc, Layout, System};
use std::io::Write;

/// [`System`], with a failed allocation turned into `error: out of memory …` and exit 1.
pub struct ExitOnOom;

// SAFETY: every method forwards to `System` with the same arguments and returns its result
// unchanged; only a null result (allocation failure) is intercepted, and then the process ends
// without returning.
unsafe impl GlobalAlloc for ExitOnOom {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract for `alloc` is passed on to `System` as is.
        let p = unsafe { System.alloc(layout) };
        if p.is_null() {
            out_of_memory(layout.size());
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as `alloc`.
        let p = unsafe { System.alloc_zeroed(layout) };
        if p.is_null() {
            out_of_memory(layout.size());
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from this allocator, i.e. from `System`, with `layout`.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: `ptr` came from `System` with `layout`; the caller guarantees `new_size`.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if p.is_null() {
            out_of_memory(new_size);
        }
        p
    }
}

/// Prints one line without allocating and exits with code 1.
#[cold]
fn out_of_memory(size: usize) -> ! {
    let mut buf = [0u8; 256];
    let mut w = &mut buf[..];
    let _ = writeln!(
        w,
        "error: out of memory: {} MiB could not be allocated; try a smaller --ctx or model",
        size >> 20
    );
    let left = w.len();
    let n = buf.len() - left;
    let _ = std::io::stderr().write_all(&buf[..n]);
    std::process::exit(1)
}

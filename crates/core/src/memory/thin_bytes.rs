//! A long key's bytes in one allocation, behind a thin pointer: a length byte, then the bytes.
//!
//! Hand-written (and the one place the in-memory store uses `unsafe`) for a measured reason: the
//! key of every table entry must stay 16 bytes (a fat `Box<[u8]>` plus the inline variant's tag
//! would make every entry 8 bytes larger, short keys included), and the thin alternative it
//! replaces, `Box<Box<[u8]>>`, costs two allocations: 133 RSS bytes per 33-byte key on the
//! memory bench (`cargo bench -p tollgate-core --bench memory -- long_keys`), against 101 for
//! this one allocation of 1 + n bytes. Crates with a thin slice carry a 16-byte header
//! (`thin-vec`) or a reference count (`triomphe`), which would take back half the saving.
#![allow(unsafe_code)]

use std::alloc::{Layout, alloc, dealloc, handle_alloc_error};
use std::ptr::NonNull;

/// Up to 255 bytes, owned, immutable, in one allocation.
pub(crate) struct ThinBytes(NonNull<u8>);

// SAFETY: `ThinBytes` owns its allocation alone and never changes it after `new`, so moving it
// to another thread or reading it from several is as safe as for a `Box<[u8]>`.
unsafe impl Send for ThinBytes {}
// SAFETY: as above: shared access only ever reads.
unsafe impl Sync for ThinBytes {}

/// The allocation holding `len` bytes and their length byte.
fn layout(len: usize) -> Layout {
    // Alignment 1 is a power of two and 1 + 255 cannot overflow `isize`: never fails.
    Layout::from_size_align(1 + len, 1).unwrap_or_else(|_| unreachable!("a valid layout"))
}

impl ThinBytes {
    /// A copy of `bytes`; `None` for more than 255 bytes.
    pub(crate) fn new(bytes: &[u8]) -> Option<Self> {
        let len = u8::try_from(bytes.len()).ok()?;
        let layout = layout(bytes.len());
        // SAFETY: the layout's size is at least 1.
        let start = unsafe { alloc(layout) };
        let Some(start) = NonNull::new(start) else {
            handle_alloc_error(layout)
        };
        // SAFETY: the allocation is 1 + len bytes: the length byte, then `len` bytes copied
        // from a slice that cannot overlap a fresh allocation.
        unsafe {
            start.as_ptr().write(len);
            start
                .as_ptr()
                .add(1)
                .copy_from_nonoverlapping(bytes.as_ptr(), bytes.len());
        }
        Some(ThinBytes(start))
    }

    /// The bytes.
    #[inline]
    pub(crate) fn as_bytes(&self) -> &[u8] {
        // SAFETY: `new` wrote the length byte and that many bytes after it, and nothing
        // changes them while `self` lives.
        unsafe {
            let len = usize::from(self.0.as_ptr().read());
            std::slice::from_raw_parts(self.0.as_ptr().add(1), len)
        }
    }
}

impl Drop for ThinBytes {
    fn drop(&mut self) {
        let len = self.as_bytes().len();
        // SAFETY: allocated in `new` with this very layout, and freed once, here.
        unsafe { dealloc(self.0.as_ptr(), layout(len)) }
    }
}

impl Clone for ThinBytes {
    fn clone(&self) -> Self {
        ThinBytes::new(self.as_bytes()).unwrap_or_else(|| unreachable!("it held them before"))
    }
}

impl PartialEq for ThinBytes {
    fn eq(&self, other: &Self) -> bool {
        self.as_bytes() == other.as_bytes()
    }
}

impl Eq for ThinBytes {}

#[cfg(test)]
mod tests {
    use super::ThinBytes;

    #[test]
    fn holds_every_length_up_to_255_and_no_more() {
        for len in [0, 1, 16, 33, 128, 255] {
            let bytes: Vec<u8> = (0..len).map(|i| (i * 7) as u8).collect();
            let thin = ThinBytes::new(&bytes).expect("fits");
            assert_eq!(thin.as_bytes(), &bytes[..]);
            let copy = thin.clone();
            drop(thin);
            assert_eq!(copy.as_bytes(), &bytes[..]);
        }
        assert!(ThinBytes::new(&[0; 256]).is_none());
    }

    #[test]
    fn a_thin_pointer_is_one_word() {
        assert_eq!(std::mem::size_of::<ThinBytes>(), 8);
        assert_eq!(std::mem::size_of::<Option<ThinBytes>>(), 8);
    }
}

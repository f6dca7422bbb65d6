//! Blocking file work inside the engine's async loop: the pass, dev mode and the drive loop
//! all read files (the inputs, dev mode's directory listings) through [`off_the_loop`], a
//! piece below all three so none of them imports another for it.

/// Runs blocking file work (reading the inputs) without stalling the other
/// tasks of a multi-threaded runtime; inline elsewhere. The reads themselves
/// are bounded and never wait on a FIFO ([`crate::inputs::read_text`]).
pub(super) fn off_the_loop<T>(work: impl FnOnce() -> T) -> T {
    match tokio::runtime::Handle::try_current() {
        Ok(handle) if handle.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
            tokio::task::block_in_place(work)
        }
        _ => work(),
    }
}

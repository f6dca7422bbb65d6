//! The kernel linked alone into a `cdylib`, with no wasm-bindgen and no glue.
//!
//! Built for `wasm32-unknown-unknown`, the module must import nothing: an
//! import from `env` would mean the kernel reaches for its host (a clock, a
//! random source, IO, a panic hook), which SPEC §0 and STYLE.md forbid.
//! `wasm-purity` checks the built module (see `scripts/wasm-build.sh`).
//!
//! The exports are a byte-at-a-time ABI, so the probe needs no pointers and
//! no `unsafe` code and every path behind [`evaluate_str`] stays linked:
//! push the request's UTF-8 bytes with [`probe_push`], call [`probe_run`]
//! (returns the response length) and read the response with [`probe_byte`].

use std::sync::Mutex;

use mcp_reconcile_kernel::evaluate_str;

static INPUT: Mutex<Vec<u8>> = Mutex::new(Vec::new());
static OUTPUT: Mutex<Vec<u8>> = Mutex::new(Vec::new());

/// Appends one byte (the low 8 bits of `byte`) to the pending request.
#[allow(unsafe_code)] // `no_mangle` exports the symbol; nothing else is unsafe
#[no_mangle]
pub extern "C" fn probe_push(byte: u32) {
    if let Ok(mut input) = INPUT.lock() {
        input.push(byte as u8);
    }
}

/// Answers the pending request, clears it and returns the response length.
#[allow(unsafe_code)]
#[no_mangle]
pub extern "C" fn probe_run() -> u32 {
    let request = INPUT
        .lock()
        .map(|mut input| std::mem::take(&mut *input))
        .unwrap_or_default();
    let response = evaluate_str(&String::from_utf8_lossy(&request));
    let len = response.len() as u32;
    if let Ok(mut output) = OUTPUT.lock() {
        *output = response.into_bytes();
    }
    len
}

/// Byte `index` of the last response, or `u32::MAX` past its end.
#[allow(unsafe_code)]
#[no_mangle]
pub extern "C" fn probe_byte(index: u32) -> u32 {
    OUTPUT
        .lock()
        .ok()
        .and_then(|output| output.get(index as usize).copied())
        .map_or(u32::MAX, u32::from)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_byte_abi_round_trips_a_request() {
        for b in br#"{"op":"matchPattern","pattern":"a*","name":"abc"}"# {
            probe_push(u32::from(*b));
        }
        let len = probe_run();
        let response: Vec<u8> = (0..len).map(|i| probe_byte(i) as u8).collect();
        assert_eq!(response, br#"{"ok":true}"#);
        assert_eq!(probe_byte(len), u32::MAX);
    }
}

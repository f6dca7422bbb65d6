//! Arbitrary text as a file for `parseSettings`: a result or an error, never a panic.
#![no_main]

#[path = "file_request.rs"]
mod file_request;

libfuzzer_sys::fuzz_target!(|data: &[u8]| file_request::run("parseSettings", data));

//! The integration tests, as one test binary: every `tests/*.rs` file is a module here.
//!
//! One binary links once and compiles the shared helpers and their generic code once, where
//! a binary per file linked mcp-reconcile, tokio and rmcp 53 times (issue 38: the suite's
//! time). Run one file's tests with a filter: `cargo test -p mcp-reconcile --test suite
//! sharing::`. `architecture::every_test_file_is_a_module_of_the_suite` fails when a file
//! is not listed below (it would silently never run).

mod common;
mod install_home;

mod approvals_store;
mod architecture;
mod catalog_security;
mod claude_code;
mod client_inputs;
mod client_layouts;
mod cline;
mod codex;
mod conformance;
mod conformance_2026;
mod daemon;
mod daemon_security;
mod daemon_stops;
mod daemon_upgrade;
mod dev_mode;
mod family_layouts;
mod fuzz_regressions;
mod gateway_routes;
mod gemini_cli;
mod imports;
mod inherited_secrets;
mod inputs;
mod install;
mod install_family;
mod install_lock;
mod install_reinstall;
mod ipc_security;
mod lazy;
mod lsp_connection;
mod lsp_security;
mod lsp_watch;
mod mcp_apps;
mod opencode;
mod opencode_install;
mod opencode_layout;
mod own_gateway;
mod parity;
mod pinning;
mod pool;
mod private_files;
mod python_clients;
mod qwen_code;
mod relay_bounds;
mod remote_oauth;
mod remote_security;
mod remote_tls;
mod running_session;
mod security;
mod serve;
mod serve_attention;
mod serve_http_eras;
mod serve_http_security;
mod serve_modern;
mod sharing;
mod skills;
mod slow_start;
mod supervision;
mod tool_names;
mod transport;
mod ts_clients;
mod watch;
mod watch_output;
mod zcg_layouts;

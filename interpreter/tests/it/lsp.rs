//! `dlc lsp`: the real binary spoken to over stdio with real JSON-RPC (`stdio`), each feature's
//! answers in the cases that test does not reach (`features`), the server's handlers on every
//! prefix of the examples and of corpus files (`no_crash`), and the position conversions every
//! feature relies on (`positions`).

mod client;
mod features;
mod no_crash;
mod positions;
mod stdio;

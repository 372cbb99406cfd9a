//! One module per command of the binary.

pub mod bottleneck;
pub mod explain;
pub mod replay;
pub mod run;

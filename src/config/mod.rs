//! Hadoop `<configuration>` files: the XML reader, the capacity scheduler's queue tree and
//! Preemptor's own typed settings. Reads files; does nothing else.

pub mod cli;
pub mod settings;

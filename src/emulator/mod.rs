//! A small YARN (RM + NMs) with the real REST API, running real Docker containers.
pub mod cli;
pub mod image;

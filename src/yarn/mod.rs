//! ResourceManager and NodeManager REST: DTOs shared by the client and the emulator.

pub mod dto;
pub mod lenient;

//! Architecture-specific code. Only x86_64 exists; everything that touches
//! CPU registers, descriptor tables or interrupt controllers lives below.

pub mod x86_64;
pub use self::x86_64::*;

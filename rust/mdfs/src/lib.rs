//! MDFS kernel for geofed: discretization, counting and information gain, with the
//! reference's (PyPI mdfs 1.5.x) random streams so results match it.

pub mod contrast;
pub mod discretize;
pub mod kernel;
pub mod mt;
#[cfg(feature = "python")]
mod py;

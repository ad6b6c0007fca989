//! The runners the master runs itself, with Salt's names, arguments and
//! return shapes, for salt-api's `runner` client and `maid runner`:
//! [`jobs`] over the job cache, [`manage`] over the fleet. Their arguments
//! are bound by [`crate::binding`].

pub mod jobs;
pub mod manage;

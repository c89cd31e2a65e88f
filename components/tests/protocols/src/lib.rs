//! The small protocols test components speak with each other, each
//! defined in one place so that both ends agree (the pattern sessions
//! follow):
//!
//! - [`ping`]: the protocol of the `pinger` server, its client
//!   `pingclient` and the `fuzzer`, which tells the pinger when it is done;
//! - [`stream`]: between the packet-stream test pair `test-stream-source`
//!   and `test-stream-sink-server`;
//! - [`ds_test`]: the `Ds_test` session between the dataspace test pair
//!   `test-dataspace-client` and `test-dataspace-service`;
//! - [`own_caps`]: not a protocol but a probe both `test-caps` and `hello`
//!   run, of the own-capability slots their parent granted or not.
//!
//! Only tests link this crate; the runtime every component links (`rt`)
//! does not carry it.
#![no_std]

pub mod ds_test;
pub mod own_caps;
pub mod ping;
pub mod stream;

//! The gateway controller's decisions, without I/O: what ALB instances make. One instance as
//! the controller reads it and the names everything made shares ([`instance`]); which
//! instance controls each Gateway and the Gateway it becomes ([`instances`]), and where a
//! younger one's settings differ ([`conflict`]); its proxy
//! workload ([`workload`]) and GeoIP's geoproxy and downloads ([`geoproxy`]), from the parts
//! every pod shares ([`pods`]); and, when the controller is asked to, the workload of a
//! Gateway no instance names ([`provision`]); and what the admission webhooks decide of a
//! request ([`admission`]). The controller's shell (`fairlead-edge-controller`) reads
//! the world, asks these, and applies what they return.

pub mod admission;
pub mod conflict;
pub mod geoproxy;
pub mod instance;
pub mod instances;
pub mod pods;
pub mod provision;
pub mod workload;

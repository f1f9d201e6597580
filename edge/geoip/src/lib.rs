//! GeoIP for the ALB, over the editions of [`fairlead_edge_api::geoip`]: what a download
//! must be before anything keeps it ([`archive`]); the data directory of the geoproxy and of
//! the downloader beside Envoy ([`store`]) and bringing one edition up to date in it
//! ([`update`]); where databases come from and asking for one ([`source`], over a small
//! HTTP(S) client, [`http`]); serving them with validators and ranges ([`serve`]); the
//! geoproxy that keeps them fresh for the cluster ([`geoproxy`]) and how it starts in a
//! process ([`start`]); and the downloader beside Envoy ([`downloader`]).

pub mod archive;
pub mod downloader;
pub mod geoproxy;
pub use fairlead_kit::http;
pub mod serve;
pub mod source;
pub mod start;
pub mod store;
pub mod update;

pub use fairlead_edge_api::geoip::Edition;

//! The ingress-nginx → ALB converter (Deckhouse's `ingress2gateway`): a body of Ingresses,
//! Services and DexAuthenticators ([`read`]) becomes draft Gateway API YAML for an ALB
//! instance's Gateway ([`convert`]): per namespace a ListenerSet with an HTTP listener for
//! each host (and an HTTPS one for each host the Ingress gives a certificate), per Ingress
//! host an HTTPRoute with a rule per path, the ingress-nginx annotations of Deckhouse's
//! mapping table carried as `alb.network.deckhouse.io/*` annotations or Gateway API fields
//! ([`nginx`]), ReferenceGrants where the objects land in other namespaces, and a YAML comment
//! for each thing it could not carry. Pure: the gateway controller's endpoint and the CLI
//! only read and write.

pub mod convert;
pub mod nginx;
pub mod read;

pub use convert::{Options, Scope, convert};
pub use read::{Inputs, ReadError, read};

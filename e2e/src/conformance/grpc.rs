//! The suite's gRPC expectations (`conformance/utils/grpc`): a call through a Gateway must end
//! with a status code and, when it succeeds, have been answered for the method asked by a pod
//! of the wanted backend and namespace — eventually, [`super::IN_A_ROW`] times in a row.

use std::time::Duration;

pub use crate::echo::grpc::Call;
use crate::echo::grpc::{self, SERVICE};

use super::{World, consistently};

/// What a call must end with (the suite's `grpc.ExpectedResponse`).
#[derive(Clone, Copy, Debug)]
pub struct GrpcWant<'a> {
    /// The status code.
    pub code: tonic::Code,
    /// The Deployment whose pod answered (any when empty).
    pub backend: &'a str,
    /// Its namespace (any when `None`).
    pub namespace: Option<&'a str>,
}

impl<'a> GrpcWant<'a> {
    /// Answered by a pod of `backend` in `namespace`.
    pub fn backend(backend: &'a str, namespace: &'a str) -> Self {
        Self {
            code: tonic::Code::Ok,
            backend,
            namespace: Some(namespace),
        }
    }

    /// Failed with `code`.
    pub fn code(code: tonic::Code) -> Self {
        Self {
            code,
            backend: "",
            namespace: None,
        }
    }

    /// Whether the call `call` ended as wanted (the suite's `compareResponse`); what it ended
    /// with, when not.
    fn holds(&self, call: &Call<'_>, called: &grpc::Called) -> Result<(), String> {
        let Ok(ended) = called else {
            return Err(format!("no call: {called:?}"));
        };
        let code = match ended {
            Ok(_) => tonic::Code::Ok,
            Err(status) => status.code(),
        };
        if code != self.code {
            return Err(format!("ended {code:?}: {ended:?}"));
        }
        let Ok(answer) = ended else {
            return Ok(());
        };
        let seen = answer.assertions.clone().unwrap_or_default();
        let context = seen.context.clone().unwrap_or_default();
        let holds = seen.fully_qualified_method == format!("/{SERVICE}/{}", call.method)
            && self.namespace.is_none_or(|ns| context.namespace == ns)
            && context.pod.starts_with(self.backend);
        if holds {
            Ok(())
        } else {
            Err(format!("answered {seen:?}"))
        }
    }
}

/// How long one call may take (the suite gives each what is left of its 30 s).
const CALL_TIMEOUT: Duration = Duration::from_secs(10);

impl World {
    /// Calls `call` through the Gateway `gateway`'s listener on `port` until it ends as
    /// `want` says [`super::IN_A_ROW`] times in a row (the suite's
    /// `MakeRequestAndExpectEventuallyConsistentResponse` for gRPC).
    pub async fn expect_grpc(&self, gateway: &str, port: u16, call: Call<'_>, want: GrpcWant<'_>) {
        let address = self.gateway(gateway, port);
        let held = consistently(async || {
            let called = grpc::call(&address, call, CALL_TIMEOUT).await;
            want.holds(&call, &called).map_err(|seen| {
                format!("{call:?} through {address} never ended as {want:?}; last: {seen}")
            })
        })
        .await;
        if let Err(seen) = held {
            panic!("{seen}");
        }
    }

    /// The pod that answered `call` through the Gateway `gateway`'s listener on `port`
    /// (`None` when it did not succeed): the suite's sender of weighted gRPC calls.
    pub async fn grpc_pod(&self, gateway: &str, port: u16, call: Call<'_>) -> Option<String> {
        let address = self.gateway(gateway, port);
        let answer = grpc::call(&address, call, CALL_TIMEOUT).await.ok()?.ok()?;
        answer.assertions?.context.map(|c| c.pod)
    }
}

//! The shell of `fairlead_edge_controller_plan::provision`: with `--provision-gateways`, every
//! Gateway of class `d8-alb` that no instance names gets proxies of its own — its client
//! certificate kept, its workload applied server-side — in the jobs' round over every
//! instance (the `jobs` module), woken by every change of an instance or a Gateway. A Gateway
//! whose inputs have not changed since it was last applied, its certificate not due, is
//! neither planned nor applied again (for up to [`REAPPLY`], so what someone deleted comes
//! back) — the round runs on every status write to any Gateway;
//! one that fails to apply does not hold up the others, is said in its condition
//! (the `unmanaged` module) and the log, and fails the round (retried with backoff, counted).

use std::collections::{BTreeMap, HashMap};
use std::hash::{Hash as _, Hasher as _};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use fairlead_key::ObjectKey;
use fairlead_kit::pki::Ca;
use kube::api::DynamicObject;

use crate::context::{Context, ReconcileError};
use crate::instances::Instance;

use fairlead_edge_controller_plan::provision::plan;

/// How long an application stands: after this, a Gateway's objects are applied again even
/// if nothing changed.
pub const REAPPLY: Duration = Duration::from_secs(300);

/// How a provisioned Gateway went: applied, or why not.
pub type Outcome = Result<(), String>;

/// What was last applied for each provisioned Gateway.
#[derive(Debug, Default)]
pub(crate) struct Provisioner {
    applied: HashMap<ObjectKey, Applied>,
}

/// One Gateway's last application: the digest of its inputs ([`inputs`]), when it was, and
/// when its certificate is due.
#[derive(Debug)]
struct Applied {
    digest: u64,
    at: Instant,
    due: Option<SystemTime>,
}

impl Provisioner {
    /// Provisions every Gateway of the class among `gateways` that no instance of
    /// `controlling` names and that is not being deleted; how each went. The first failure,
    /// after every Gateway had its turn.
    pub(crate) async fn round(
        &mut self,
        context: &Context,
        ca: &Ca,
        gateways: &[Arc<DynamicObject>],
        controlling: &BTreeMap<ObjectKey, &Instance>,
    ) -> (BTreeMap<ObjectKey, Outcome>, Result<(), ReconcileError>) {
        let mut outcomes = BTreeMap::new();
        let mut first_error = Ok(());
        for object in gateways {
            if object.data["spec"]["gatewayClassName"] != crate::crds::GATEWAY_CLASS
                || object.metadata.deletion_timestamp.is_some()
            {
                continue;
            }
            let (Some(namespace), Some(name)) = (&object.metadata.namespace, &object.metadata.name)
            else {
                continue;
            };
            let key = ObjectKey::new(namespace, name);
            if controlling.contains_key(&key) {
                continue;
            }
            let waf = crate::realize::asks_for_waf(&object.data);
            let digest = inputs(object, waf, ca);
            if self.fresh(&key, digest) {
                outcomes.insert(key, Ok(()));
                continue;
            }
            let result = self.provision(context, ca, object, waf, digest).await;
            if let Err(e) = &result {
                tracing::warn!(gateway = %key, error = %e, "provisioning the Gateway's proxies failed");
            }
            outcomes.insert(
                key,
                result.as_ref().map(|_| ()).map_err(ToString::to_string),
            );
            if let Err(e) = result
                && first_error.is_ok()
            {
                first_error = Err(e);
            }
        }
        self.applied.retain(|key, _| outcomes.contains_key(key));
        (outcomes, first_error)
    }

    /// Whether `key` was applied from inputs of `digest` recently enough, its certificate
    /// not due.
    fn fresh(&self, key: &ObjectKey, digest: u64) -> bool {
        self.applied.get(key).is_some_and(|a| {
            a.digest == digest
                && a.at.elapsed() < REAPPLY
                && a.due.is_none_or(|due| due > SystemTime::now())
        })
    }

    /// Plans the Gateway `object` (`waf`: a route of it asks for the WAF) and applies what
    /// it makes, remembered under `digest` (its inputs').
    async fn provision(
        &mut self,
        context: &Context,
        ca: &Ca,
        object: &DynamicObject,
        waf: bool,
        digest: u64,
    ) -> Result<(), ReconcileError> {
        let gateway = serde_json::to_value(object)
            .and_then(serde_json::from_value::<fairlead_edge_model::input::Gateway>)
            .map_err(|e| ReconcileError::Render(format!("reading the Gateway: {e}")))?;
        let Some(provision) = plan(&gateway, waf, &context.config.workload) else {
            return Ok(());
        };
        let workload = provision
            .workload
            .as_ref()
            .map_err(|e| ReconcileError::Render(e.to_string()))?;
        self.applied.remove(&provision.gateway);
        let due = crate::realize::keep_client_certificate(
            &context.client,
            ca,
            &provision.gateway,
            &provision.owners,
            &context.config,
            &context.metrics,
        )
        .await?;
        crate::realize::apply_workload(&context.client, workload, &provision.gateway).await?;
        self.applied.insert(
            provision.gateway.clone(),
            Applied {
                digest,
                at: Instant::now(),
                due,
            },
        );
        Ok(())
    }
}

/// A digest of what a provisioned Gateway's plan is made from (so an unchanged Gateway is
/// neither planned nor applied again): its uid, spec (through its generation) and labels and
/// annotations, whether its routes ask for the WAF, and the CA.
fn inputs(object: &DynamicObject, waf: bool, ca: &Ca) -> u64 {
    let mut digest = std::collections::hash_map::DefaultHasher::new();
    object.metadata.uid.hash(&mut digest);
    object.metadata.generation.hash(&mut digest);
    object
        .metadata
        .creation_timestamp
        .as_ref()
        .map(|t| t.0.to_string())
        .hash(&mut digest);
    object.metadata.labels.hash(&mut digest);
    object.metadata.annotations.hash(&mut digest);
    waf.hash(&mut digest);
    ca.cert_pem().hash(&mut digest);
    digest.finish()
}

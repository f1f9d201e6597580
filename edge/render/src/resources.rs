//! The IR of a Gateway rendered into its Envoy resources, one module per xDS type; the
//! encodings of routes, clusters and endpoint assignments come through a [`Recall`] (the
//! pipeline's second memo boundary), everything else is rendered every time (it is cheap).

use fairlead_edge_model::instance::Settings;
use fairlead_edge_model::{Encoded, Resources, WithoutGeoip};
use fairlead_edge_translate::ir::Gateway;

use crate::features::{ByConfig, Filters};
use crate::memo::Recall;
use crate::{cluster, endpoint, listener, route, secret};

/// The listeners of `ir` with what its instance asks (`edge`) and the filters its routes ask
/// for (`filters`).
fn listeners(ir: &Gateway, edge: &Settings, filters: &ByConfig<'_>) -> Vec<Encoded> {
    let mut listeners: Vec<Encoded> = ir
        .listeners
        .iter()
        .map(|l| listener::encode(l, &ir.addresses, edge, filters))
        .collect();
    listeners.extend(
        ir.listeners
            .iter()
            .filter_map(|l| listener::encode_quic(l, &ir.addresses, edge, filters)),
    );
    listeners
}

/// The resources of `ir`.
pub(crate) fn resources(ir: &Gateway, recall: &mut impl Recall) -> Resources {
    let editions = ir.edge.geoip_editions();
    let filters = Filters::by_config(&ir.route_configs);
    let mut out = Resources {
        listeners: listeners(ir, &ir.edge, &filters),
        without_geoip: (!editions.is_empty()).then(|| WithoutGeoip {
            editions,
            listeners: listeners(ir, &ir.edge.without_geoip_filter(), &filters),
        }),
        ..Resources::default()
    };
    let alt_svc = listener::alt_svc(&ir.listeners, &ir.edge);
    out.routes = ir
        .route_configs
        .iter()
        .map(|config| {
            let advertised = alt_svc.get(&config.name).map(String::as_str);
            route::encode(config, advertised, |r, origin, write| {
                recall.encoded_route(
                    r,
                    origin,
                    || route::encode_entry(&r.entry, origin, r.drained),
                    write,
                );
            })
        })
        .collect();
    out.clusters.reserve_exact(ir.clusters.len());
    out.endpoints.reserve_exact(ir.clusters.len());
    for c in &ir.clusters {
        out.clusters.push(Encoded {
            name: c.name.clone(),
            bytes: recall.cluster(c, || cluster::encode(c)),
        });
        out.endpoints.push(Encoded {
            name: c.name.clone(),
            bytes: recall.endpoints(c, || endpoint::encode(c)),
        });
    }
    for split in &ir.splits {
        out.clusters.push(Encoded {
            name: split.name.clone(),
            bytes: crate::split::cluster(split),
        });
        out.endpoints.push(Encoded {
            name: split.name.clone(),
            bytes: crate::split::endpoints(split, &ir.clusters),
        });
    }
    out.secrets = ir.secrets.iter().map(secret::encode).collect();
    out
}

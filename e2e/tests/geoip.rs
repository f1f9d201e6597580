//! GeoIP end to end: an instance's `spec.geoIP` becomes a geoproxy downloading from a mirror,
//! downloaders beside Envoy, and country and city headers a real Envoy adds for the client's
//! address; a new database replaces the old one in place.

use fairlead_e2e::Up;

/// GeoIP end to end, through real Envoys: an instance with a licence gets a geoproxy (a
/// StatefulSet whose claim is bound to an emptied directory, holding the licence copied
/// into d8-alb, elected on its Lease in d8-alb-geoip) that downloads from the instance's
/// mirror; its proxies' init container fetches
/// from the geoproxy before Envoy starts, and Envoy's GeoIP filter sets the configured
/// headers from the address X-Real-IP carries from a trusted peer — a client's own
/// geolocation header is replaced, and removed for an address the database does not know.
/// A second instance downloads from its mirror directly: while the mirror has nothing, its
/// proxy's init container fails and is run again (`CrashLoopBackOff`), Envoy waits and the
/// instance is not ready; once published the database arrives, and a newer one published
/// later reaches the proxy through the sidecar (a rename Envoy watches), the new values
/// appearing under traffic with no failed request and no restart. Without its licence the
/// first instance's geoproxy goes and its proxies take the mirror.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn geoip_headers_reach_backends_through_a_real_envoy() {
    let up = Up::with(&["--geo-downloader-interval", "10"], &[]);
    let _mirrors = fairlead_e2e::geo::world(&up).await;
    let output = up.stopped().await;
    assert!(output.status.success(), "{output:?}");
}

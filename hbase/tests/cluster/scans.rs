use crate::Ctx;
use std::sync::Arc;
pub async fn scan_many_regions_small_caching(_ctx: Arc<Ctx>) {
    unimplemented!()
}
pub async fn scan_bounds_filters_and_partials(_ctx: Arc<Ctx>) {
    unimplemented!()
}
pub async fn split_during_scan(_ctx: Arc<Ctx>) {
    unimplemented!()
}
pub async fn move_during_scan(_ctx: Arc<Ctx>) {
    unimplemented!()
}

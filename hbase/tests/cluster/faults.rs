use crate::Ctx;
use std::sync::Arc;
pub async fn split_during_writes(_ctx: Arc<Ctx>) {
    unimplemented!()
}
pub async fn move_during_writes(_ctx: Arc<Ctx>) {
    unimplemented!()
}
pub async fn killed_region_server_during_writes(_ctx: Arc<Ctx>) {
    unimplemented!()
}

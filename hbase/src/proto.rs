//! The protobuf messages of HBase's client RPC that this crate sends and reads, hand-written as prost structs.
//!
//! Only the fields the client uses are declared: protobuf skips unknown fields on decode, and an absent optional
//! field is not encoded, so a subset is wire-compatible. The field numbers and enum values are HBase's public
//! wire contract (RPC, HBase, Cell, Client, Filter, Comparator and ZooKeeper messages of HBase 2.x); names follow
//! HBase's where that helps reading a server log next to this code.
#![allow(clippy::derive_partial_eq_without_eq)]

// --- RPC framing ------------------------------------------------------------------------------------------------

#[derive(Clone, PartialEq, prost::Message)]
pub struct UserInformation {
    #[prost(string, required, tag = "1")]
    pub effective_user: String,
}

/// Sent once after the `HBas` preamble. No `cell_block_codec_class` (tag 3): the server then answers every
/// `Result` as protobuf `Cell`s instead of a cell block, which keeps the client free of the KeyValue codec.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ConnectionHeader {
    #[prost(message, optional, tag = "1")]
    pub user_info: Option<UserInformation>,
    #[prost(string, optional, tag = "2")]
    pub service_name: Option<String>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct RequestHeader {
    #[prost(uint32, optional, tag = "1")]
    pub call_id: Option<u32>,
    #[prost(string, optional, tag = "3")]
    pub method_name: Option<String>,
    #[prost(bool, optional, tag = "4")]
    pub request_param: Option<bool>,
    /// Milliseconds the server may spend on the call before giving it up.
    #[prost(uint32, optional, tag = "7")]
    pub timeout: Option<u32>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct ExceptionResponse {
    #[prost(string, optional, tag = "1")]
    pub exception_class_name: Option<String>,
    #[prost(string, optional, tag = "2")]
    pub stack_trace: Option<String>,
    #[prost(string, optional, tag = "3")]
    pub hostname: Option<String>,
    #[prost(int32, optional, tag = "4")]
    pub port: Option<i32>,
    #[prost(bool, optional, tag = "5")]
    pub do_not_retry: Option<bool>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct CellBlockMeta {
    #[prost(uint32, optional, tag = "1")]
    pub length: Option<u32>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct ResponseHeader {
    #[prost(uint32, optional, tag = "1")]
    pub call_id: Option<u32>,
    #[prost(message, optional, tag = "2")]
    pub exception: Option<ExceptionResponse>,
    #[prost(message, optional, tag = "3")]
    pub cell_block_meta: Option<CellBlockMeta>,
}

// --- HBase.proto ------------------------------------------------------------------------------------------------

#[derive(Clone, PartialEq, prost::Message)]
pub struct TableName {
    #[prost(bytes = "vec", required, tag = "1")]
    pub namespace: Vec<u8>,
    #[prost(bytes = "vec", required, tag = "2")]
    pub qualifier: Vec<u8>,
}

/// A region's identity as `hbase:meta` stores it in `info:regioninfo` (after a `PBUF` magic).
#[derive(Clone, PartialEq, prost::Message)]
pub struct RegionInfo {
    #[prost(uint64, required, tag = "1")]
    pub region_id: u64,
    #[prost(message, required, tag = "2")]
    pub table_name: TableName,
    #[prost(bytes = "vec", optional, tag = "3")]
    pub start_key: Option<Vec<u8>>,
    #[prost(bytes = "vec", optional, tag = "4")]
    pub end_key: Option<Vec<u8>>,
    #[prost(bool, optional, tag = "5")]
    pub offline: Option<bool>,
    #[prost(bool, optional, tag = "6")]
    pub split: Option<bool>,
    #[prost(int32, optional, tag = "7")]
    pub replica_id: Option<i32>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, prost::Enumeration)]
#[repr(i32)]
pub enum RegionSpecifierType {
    RegionName = 1,
    EncodedRegionName = 2,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct RegionSpecifier {
    #[prost(enumeration = "RegionSpecifierType", required, tag = "1")]
    pub r#type: i32,
    #[prost(bytes = "vec", required, tag = "2")]
    pub value: Vec<u8>,
}

impl RegionSpecifier {
    pub fn name(region_name: &[u8]) -> RegionSpecifier {
        RegionSpecifier { r#type: RegionSpecifierType::RegionName as i32, value: region_name.to_vec() }
    }
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct TimeRange {
    #[prost(uint64, optional, tag = "1")]
    pub from: Option<u64>,
    #[prost(uint64, optional, tag = "2")]
    pub to: Option<u64>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, prost::Enumeration)]
#[repr(i32)]
pub enum CompareType {
    Less = 0,
    LessOrEqual = 1,
    Equal = 2,
    NotEqual = 3,
    GreaterOrEqual = 4,
    Greater = 5,
    NoOp = 6,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct ServerName {
    #[prost(string, required, tag = "1")]
    pub host_name: String,
    #[prost(uint32, optional, tag = "2")]
    pub port: Option<u32>,
    #[prost(uint64, optional, tag = "3")]
    pub start_code: Option<u64>,
}

/// An exception of one action inside a Multi: class name and its message.
#[derive(Clone, PartialEq, prost::Message)]
pub struct NameBytesPair {
    #[prost(string, required, tag = "1")]
    pub name: String,
    #[prost(bytes = "vec", optional, tag = "2")]
    pub value: Option<Vec<u8>>,
}

// --- Cell.proto -------------------------------------------------------------------------------------------------

#[derive(Clone, PartialEq, prost::Message)]
pub struct Cell {
    #[prost(bytes = "vec", optional, tag = "1")]
    pub row: Option<Vec<u8>>,
    #[prost(bytes = "vec", optional, tag = "2")]
    pub family: Option<Vec<u8>>,
    #[prost(bytes = "vec", optional, tag = "3")]
    pub qualifier: Option<Vec<u8>>,
    #[prost(uint64, optional, tag = "4")]
    pub timestamp: Option<u64>,
    #[prost(int32, optional, tag = "5")]
    pub cell_type: Option<i32>,
    #[prost(bytes = "vec", optional, tag = "6")]
    pub value: Option<Vec<u8>>,
}

// --- Filter.proto / Comparator.proto ----------------------------------------------------------------------------

/// A server-side filter: its Java class name and that class's own serialized protobuf.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Filter {
    #[prost(string, required, tag = "1")]
    pub name: String,
    #[prost(bytes = "vec", optional, tag = "2")]
    pub serialized_filter: Option<Vec<u8>>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Comparator {
    #[prost(string, required, tag = "1")]
    pub name: String,
    #[prost(bytes = "vec", optional, tag = "2")]
    pub serialized_comparator: Option<Vec<u8>>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct ByteArrayComparable {
    #[prost(bytes = "vec", optional, tag = "1")]
    pub value: Option<Vec<u8>>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct BinaryComparator {
    #[prost(message, required, tag = "1")]
    pub comparable: ByteArrayComparable,
}

// --- Client.proto -----------------------------------------------------------------------------------------------

#[derive(Clone, PartialEq, prost::Message)]
pub struct Column {
    #[prost(bytes = "vec", required, tag = "1")]
    pub family: Vec<u8>,
    #[prost(bytes = "vec", repeated, tag = "2")]
    pub qualifier: Vec<Vec<u8>>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Get {
    #[prost(bytes = "vec", required, tag = "1")]
    pub row: Vec<u8>,
    #[prost(message, repeated, tag = "2")]
    pub column: Vec<Column>,
    #[prost(message, optional, tag = "4")]
    pub filter: Option<Filter>,
    #[prost(message, optional, tag = "5")]
    pub time_range: Option<TimeRange>,
    #[prost(uint32, optional, tag = "6")]
    pub max_versions: Option<u32>,
    #[prost(bool, optional, tag = "10")]
    pub existence_only: Option<bool>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Result {
    #[prost(message, repeated, tag = "1")]
    pub cell: Vec<Cell>,
    #[prost(int32, optional, tag = "2")]
    pub associated_cell_count: Option<i32>,
    #[prost(bool, optional, tag = "3")]
    pub exists: Option<bool>,
    #[prost(bool, optional, tag = "4")]
    pub stale: Option<bool>,
    #[prost(bool, optional, tag = "5")]
    pub partial: Option<bool>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct GetRequest {
    #[prost(message, required, tag = "1")]
    pub region: RegionSpecifier,
    #[prost(message, required, tag = "2")]
    pub get: Get,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct GetResponse {
    #[prost(message, optional, tag = "1")]
    pub result: Option<Result>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Condition {
    #[prost(bytes = "vec", required, tag = "1")]
    pub row: Vec<u8>,
    #[prost(bytes = "vec", optional, tag = "2")]
    pub family: Option<Vec<u8>>,
    #[prost(bytes = "vec", optional, tag = "3")]
    pub qualifier: Option<Vec<u8>>,
    #[prost(enumeration = "CompareType", optional, tag = "4")]
    pub compare_type: Option<i32>,
    #[prost(message, optional, tag = "5")]
    pub comparator: Option<Comparator>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, prost::Enumeration)]
#[repr(i32)]
pub enum MutationType {
    Append = 0,
    Increment = 1,
    Put = 2,
    Delete = 3,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, prost::Enumeration)]
#[repr(i32)]
#[allow(clippy::enum_variant_names)] // HBase's names
pub enum DeleteType {
    DeleteOneVersion = 0,
    DeleteMultipleVersions = 1,
    DeleteFamily = 2,
    DeleteFamilyVersion = 3,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct QualifierValue {
    #[prost(bytes = "vec", optional, tag = "1")]
    pub qualifier: Option<Vec<u8>>,
    #[prost(bytes = "vec", optional, tag = "2")]
    pub value: Option<Vec<u8>>,
    #[prost(uint64, optional, tag = "3")]
    pub timestamp: Option<u64>,
    #[prost(enumeration = "DeleteType", optional, tag = "4")]
    pub delete_type: Option<i32>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct ColumnValue {
    #[prost(bytes = "vec", required, tag = "1")]
    pub family: Vec<u8>,
    #[prost(message, repeated, tag = "2")]
    pub qualifier_value: Vec<QualifierValue>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct MutationProto {
    #[prost(bytes = "vec", optional, tag = "1")]
    pub row: Option<Vec<u8>>,
    #[prost(enumeration = "MutationType", optional, tag = "2")]
    pub mutate_type: Option<i32>,
    #[prost(message, repeated, tag = "3")]
    pub column_value: Vec<ColumnValue>,
    #[prost(uint64, optional, tag = "4")]
    pub timestamp: Option<u64>,
    /// Durability enum: 0 USE_DEFAULT (the table's, SYNC_WAL unless changed).
    #[prost(int32, optional, tag = "6")]
    pub durability: Option<i32>,
    /// With the request's nonce group, lets the server recognise a retried Increment or Append it already applied.
    #[prost(uint64, optional, tag = "9")]
    pub nonce: Option<u64>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct MutateRequest {
    #[prost(message, required, tag = "1")]
    pub region: RegionSpecifier,
    #[prost(message, required, tag = "2")]
    pub mutation: MutationProto,
    #[prost(message, optional, tag = "3")]
    pub condition: Option<Condition>,
    #[prost(uint64, optional, tag = "4")]
    pub nonce_group: Option<u64>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct MutateResponse {
    #[prost(message, optional, tag = "1")]
    pub result: Option<Result>,
    #[prost(bool, optional, tag = "2")]
    pub processed: Option<bool>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Scan {
    #[prost(message, repeated, tag = "1")]
    pub column: Vec<Column>,
    #[prost(bytes = "vec", optional, tag = "3")]
    pub start_row: Option<Vec<u8>>,
    #[prost(bytes = "vec", optional, tag = "4")]
    pub stop_row: Option<Vec<u8>>,
    #[prost(message, optional, tag = "5")]
    pub filter: Option<Filter>,
    #[prost(message, optional, tag = "6")]
    pub time_range: Option<TimeRange>,
    #[prost(uint32, optional, tag = "7")]
    pub max_versions: Option<u32>,
    #[prost(uint64, optional, tag = "10")]
    pub max_result_size: Option<u64>,
    #[prost(bool, optional, tag = "15")]
    pub reversed: Option<bool>,
    #[prost(uint32, optional, tag = "17")]
    pub caching: Option<u32>,
    #[prost(bool, optional, tag = "18")]
    pub allow_partial_results: Option<bool>,
    /// Sent as false: without it a 2.x server treats start == stop as a Get of that row (old clients' meaning).
    #[prost(bool, optional, tag = "22")]
    pub include_stop_row: Option<bool>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct ScanRequest {
    #[prost(message, optional, tag = "1")]
    pub region: Option<RegionSpecifier>,
    #[prost(message, optional, tag = "2")]
    pub scan: Option<Scan>,
    #[prost(uint64, optional, tag = "3")]
    pub scanner_id: Option<u64>,
    #[prost(uint32, optional, tag = "4")]
    pub number_of_rows: Option<u32>,
    #[prost(bool, optional, tag = "5")]
    pub close_scanner: Option<bool>,
    #[prost(uint64, optional, tag = "6")]
    pub next_call_seq: Option<u64>,
    #[prost(bool, optional, tag = "7")]
    pub client_handles_partials: Option<bool>,
    #[prost(bool, optional, tag = "8")]
    pub client_handles_heartbeats: Option<bool>,
    #[prost(bool, optional, tag = "10")]
    pub renew: Option<bool>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct ScanResponse {
    #[prost(uint32, repeated, packed = "false", tag = "1")]
    pub cells_per_result: Vec<u32>,
    #[prost(uint64, optional, tag = "2")]
    pub scanner_id: Option<u64>,
    #[prost(bool, optional, tag = "3")]
    pub more_results: Option<bool>,
    #[prost(uint32, optional, tag = "4")]
    pub ttl: Option<u32>,
    #[prost(message, repeated, tag = "5")]
    pub results: Vec<Result>,
    #[prost(bool, repeated, packed = "false", tag = "7")]
    pub partial_flag_per_result: Vec<bool>,
    #[prost(bool, optional, tag = "8")]
    pub more_results_in_region: Option<bool>,
    #[prost(bool, optional, tag = "9")]
    pub heartbeat_message: Option<bool>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Action {
    #[prost(uint32, optional, tag = "1")]
    pub index: Option<u32>,
    #[prost(message, optional, tag = "2")]
    pub mutation: Option<MutationProto>,
    #[prost(message, optional, tag = "3")]
    pub get: Option<Get>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct RegionAction {
    #[prost(message, required, tag = "1")]
    pub region: RegionSpecifier,
    #[prost(bool, optional, tag = "2")]
    pub atomic: Option<bool>,
    #[prost(message, repeated, tag = "3")]
    pub action: Vec<Action>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct ResultOrException {
    #[prost(uint32, optional, tag = "1")]
    pub index: Option<u32>,
    #[prost(message, optional, tag = "2")]
    pub result: Option<Result>,
    #[prost(message, optional, tag = "3")]
    pub exception: Option<NameBytesPair>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct RegionActionResult {
    #[prost(message, repeated, tag = "1")]
    pub result_or_exception: Vec<ResultOrException>,
    #[prost(message, optional, tag = "2")]
    pub exception: Option<NameBytesPair>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct MultiRequest {
    #[prost(message, repeated, tag = "1")]
    pub region_action: Vec<RegionAction>,
    #[prost(uint64, optional, tag = "2")]
    pub nonce_group: Option<u64>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct MultiResponse {
    #[prost(message, repeated, tag = "1")]
    pub region_action_result: Vec<RegionActionResult>,
}

// --- ZooKeeper.proto --------------------------------------------------------------------------------------------

/// The content of `/hbase/meta-region-server` after its `0xFF` + metadata + `PBUF` prefix.
#[derive(Clone, PartialEq, prost::Message)]
pub struct MetaRegionServer {
    #[prost(message, required, tag = "1")]
    pub server: ServerName,
    #[prost(uint32, optional, tag = "2")]
    pub rpc_version: Option<u32>,
    #[prost(int32, optional, tag = "3")]
    pub state: Option<i32>,
}

// --- Registry.proto (ClientMetaService, HBase >= 2.5 region servers and masters) --------------------------------

#[derive(Clone, PartialEq, prost::Message)]
pub struct GetMetaRegionLocationsRequest {}

#[derive(Clone, PartialEq, prost::Message)]
pub struct RegionLocation {
    #[prost(message, optional, tag = "1")]
    pub region_info: Option<RegionInfo>,
    #[prost(message, optional, tag = "2")]
    pub server_name: Option<ServerName>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct GetMetaRegionLocationsResponse {
    #[prost(message, repeated, tag = "1")]
    pub meta_locations: Vec<RegionLocation>,
}

// --- ZooKeeper.proto: `<basedir>/master` ------------------------------------------------------------------------

/// The active master, as it writes itself into `<basedir>/master` (after the `0xFF` + metadata + `PBUF` framing).
#[derive(Clone, PartialEq, prost::Message)]
pub struct Master {
    #[prost(message, required, tag = "1")]
    pub master: ServerName,
    #[prost(uint32, optional, tag = "2")]
    pub rpc_version: Option<u32>,
    #[prost(uint32, optional, tag = "3")]
    pub info_port: Option<u32>,
}

// --- HBase.proto: schemas ---------------------------------------------------------------------------------------

#[derive(Clone, PartialEq, prost::Message)]
pub struct BytesBytesPair {
    #[prost(bytes = "vec", required, tag = "1")]
    pub first: Vec<u8>,
    #[prost(bytes = "vec", required, tag = "2")]
    pub second: Vec<u8>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct NameStringPair {
    #[prost(string, required, tag = "1")]
    pub name: String,
    #[prost(string, required, tag = "2")]
    pub value: String,
}

/// A column family's descriptor: its attributes (`TTL`, `VERSIONS`, `BLOOMFILTER`, ... as strings) and its
/// per-family configuration overrides.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ColumnFamilySchema {
    #[prost(bytes = "vec", required, tag = "1")]
    pub name: Vec<u8>,
    #[prost(message, repeated, tag = "2")]
    pub attributes: Vec<BytesBytesPair>,
    #[prost(message, repeated, tag = "3")]
    pub configuration: Vec<NameStringPair>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct TableSchema {
    #[prost(message, optional, tag = "1")]
    pub table_name: Option<TableName>,
    #[prost(message, repeated, tag = "2")]
    pub attributes: Vec<BytesBytesPair>,
    #[prost(message, repeated, tag = "3")]
    pub column_families: Vec<ColumnFamilySchema>,
    #[prost(message, repeated, tag = "4")]
    pub configuration: Vec<NameStringPair>,
}

// --- Master.proto (MasterService) -------------------------------------------------------------------------------

#[derive(Clone, PartialEq, prost::Message)]
pub struct GetTableDescriptorsRequest {
    #[prost(message, repeated, tag = "1")]
    pub table_names: Vec<TableName>,
    #[prost(string, optional, tag = "2")]
    pub regex: Option<String>,
    #[prost(bool, optional, tag = "3")]
    pub include_sys_tables: Option<bool>,
    #[prost(string, optional, tag = "4")]
    pub namespace: Option<String>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct GetTableDescriptorsResponse {
    #[prost(message, repeated, tag = "1")]
    pub table_schema: Vec<TableSchema>,
}

/// Replaces one family's whole descriptor (HBase 2.x: a procedure; the answer carries its id).
#[derive(Clone, PartialEq, prost::Message)]
pub struct ModifyColumnRequest {
    #[prost(message, required, tag = "1")]
    pub table_name: TableName,
    #[prost(message, required, tag = "2")]
    pub column_families: ColumnFamilySchema,
    #[prost(uint64, optional, tag = "3")]
    pub nonce_group: Option<u64>,
    #[prost(uint64, optional, tag = "4")]
    pub nonce: Option<u64>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct ModifyColumnResponse {
    #[prost(uint64, optional, tag = "1")]
    pub proc_id: Option<u64>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct GetProcedureResultRequest {
    #[prost(uint64, required, tag = "1")]
    pub proc_id: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, prost::Enumeration)]
#[repr(i32)]
pub enum ProcedureState {
    NotFound = 0,
    Running = 1,
    Finished = 2,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct GenericExceptionMessage {
    #[prost(string, optional, tag = "1")]
    pub class_name: Option<String>,
    #[prost(string, optional, tag = "2")]
    pub message: Option<String>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct ForeignExceptionMessage {
    #[prost(string, optional, tag = "1")]
    pub source: Option<String>,
    #[prost(message, optional, tag = "2")]
    pub generic_exception: Option<GenericExceptionMessage>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct GetProcedureResultResponse {
    #[prost(enumeration = "ProcedureState", required, tag = "1")]
    pub state: i32,
    #[prost(uint64, optional, tag = "2")]
    pub submitted_time: Option<u64>,
    #[prost(uint64, optional, tag = "3")]
    pub last_update: Option<u64>,
    #[prost(message, optional, tag = "5")]
    pub exception: Option<ForeignExceptionMessage>,
}

// --- Registry.proto: the active master, for a client without ZooKeeper ------------------------------------------

#[derive(Clone, PartialEq, prost::Message)]
pub struct GetActiveMasterRequest {}

#[derive(Clone, PartialEq, prost::Message)]
pub struct GetActiveMasterResponse {
    #[prost(message, optional, tag = "1")]
    pub server_name: Option<ServerName>,
}

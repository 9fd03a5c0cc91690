//! HTTP/1.1 on the wire: request bytes built once, responses framed by counting.

mod chunked;
mod request;
mod response;

pub use request::{build_h2_request, build_request, build_request_as};
pub use response::{Feed, ResponseParser};

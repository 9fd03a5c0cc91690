//! The machine-readable report: one JSON document, schema in schema/report.schema.json.

use super::Report;

pub fn render(report: &Report) -> String {
    serde_json::to_string_pretty(report).expect("the report always serializes")
}

//! Arrow schemas of the Parquet snapshot tables. Names are spelt out (not only ids) so a data
//! engineer can read a table in DuckDB or pyarrow with no join against another file.

use arrow_schema::{DataType, Field, Schema};
use std::sync::Arc;

/// Version of the table layout, written into every snapshot manifest.
pub const TABLES_VERSION: u32 = 1;

fn utf8(name: &str) -> Field {
    Field::new(name, DataType::Utf8, false)
}

fn utf8_list(name: &str) -> Field {
    Field::new(name, DataType::List(Arc::new(Field::new("item", DataType::Utf8, false))), false)
}

/// `entities`: one row per canonical entity still supported by some document.
pub fn entities() -> Schema {
    Schema::new(vec![
        utf8("entity_id"),
        utf8("name"),
        Field::new("document_count", DataType::UInt64, false),
    ])
}

/// `triples`: one row per supported triple, with its supporting documents.
pub fn triples() -> Schema {
    Schema::new(vec![
        utf8("triple_id"),
        utf8("subject_id"),
        utf8("subject"),
        utf8("relation"),
        utf8("object_id"),
        utf8("object"),
        utf8_list("supporting_documents"),
    ])
}

/// `documents`: one row per live document.
pub fn documents() -> Schema {
    Schema::new(vec![
        utf8("doc_id"),
        utf8("title"),
        Field::new("entity_count", DataType::UInt64, false),
        Field::new("triple_count", DataType::UInt64, false),
        // its access labels (empty: public)
        utf8_list("access"),
    ])
}

/// `entity_documents`: which documents mention which entity, and the name each used.
pub fn entity_documents() -> Schema {
    Schema::new(vec![utf8("entity_id"), utf8("doc_id"), utf8("name")])
}

/// `entity_links`: the synonym links entity resolution made, one row per (entity, linked entity,
/// document that carries the link), with the link's confidence (0 to 1).
pub fn entity_links() -> Schema {
    Schema::new(vec![utf8("entity_id"), utf8("linked_id"), utf8("doc_id"), Field::new("confidence", DataType::Float32, false)])
}

/// All tables by file stem.
pub fn tables() -> Vec<(&'static str, Schema)> {
    vec![
        ("entities", entities()),
        ("triples", triples()),
        ("documents", documents()),
        ("entity_documents", entity_documents()),
        ("entity_links", entity_links()),
    ]
}

#[cfg(test)]
mod tests {
    #[test]
    fn tables_have_distinct_non_empty_columns() {
        for (name, schema) in super::tables() {
            let mut cols: Vec<_> = schema.fields().iter().map(|f| f.name().clone()).collect();
            assert!(!cols.is_empty(), "{name}");
            let n = cols.len();
            cols.sort();
            cols.dedup();
            assert_eq!(cols.len(), n, "duplicate column in {name}");
        }
    }
}

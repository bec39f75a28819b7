//! Listings: pages newest first, continued by an opaque cursor.

use serde::{Deserialize, Serialize};

/// A page of a list, newest first. `next_cursor` continues it (`?before=`);
/// `null` on the last page.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ListView<T> {
    pub data: Vec<T>,
    pub next_cursor: Option<String>,
}

/// `?limit=&before=` on every list.
#[derive(Debug, Clone, Default, Serialize, Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct PageQuery {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limit: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub before: Option<String>,
}

//! The OpenAPI 3.1 document, generated from the route table: each route's
//! method, path, access and [`Doc`] (its request and answer types, whose
//! schemas derive from the Rust types themselves), with every problem code the
//! route can answer, grouped by status. `GET /openapi.json` serves it;
//! `docs/openapi.json` is a copy a test keeps equal to it.

use std::collections::BTreeMap;

use utoipa::openapi::path::{HttpMethod, OperationBuilder, ParameterBuilder, ParameterIn};
use utoipa::openapi::request_body::RequestBodyBuilder;
use utoipa::openapi::schema::{ArrayBuilder, ObjectBuilder, Schema, Type};
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityRequirement, SecurityScheme};
use utoipa::openapi::{
    ComponentsBuilder, ContentBuilder, InfoBuilder, OpenApi, OpenApiBuilder, Paths, Ref, RefOr,
    Required, ResponseBuilder,
};

use crate::auth::Access;
use crate::error::CATALOG;
pub(crate) use hookline_types::id_pattern;
pub(crate) use hookline_types::schema::{name, string, FUTURE_PATTERN, NAME_PATTERN, TIME_PATTERN};

/// Schemas the document's components hold, by name.
pub(crate) type Schemas = Vec<(String, RefOr<Schema>)>;
/// Registers a type's schema (and those it refers to); a reference to it.
pub(crate) type SchemaOf = fn(&mut Schemas) -> RefOr<Schema>;

pub(crate) fn schema<T: utoipa::ToSchema>(schemas: &mut Schemas) -> RefOr<Schema> {
    schemas.push((T::name().into_owned(), T::schema()));
    T::schemas(schemas);
    Ref::from_schema_name(T::name()).into()
}

/// What a route takes and answers, beside what the route table says.
#[derive(Clone, Copy)]
pub(crate) struct Doc {
    pub summary: &'static str,
    pub body: Option<SchemaOf>,
    pub query: Option<fn() -> Vec<utoipa::openapi::path::Parameter>>,
    pub status: u16,
    pub answer: Answer,
    /// Problem codes this route answers beyond the ones its access, path, body
    /// and query imply.
    pub errors: &'static [&'static str],
    /// A second successful answer (a status other than `status`).
    pub also: Option<(u16, Answer)>,
    /// A listing's `before`: the pattern its `next_cursor` follows.
    pub cursor: Option<&'static str>,
}

/// A successful answer's body.
#[derive(Clone, Copy)]
pub(crate) enum Answer {
    /// None (204, or a bare status).
    Empty,
    Json(SchemaOf),
    /// `{"data": [T], "next_cursor": string | null}`.
    List(SchemaOf),
    /// JSON described in docs/api.md (the link is in the summary).
    Object,
    /// `text/plain`.
    Text,
    /// `text/html` (a page for a browser; its errors are pages too).
    Html,
    /// One of two JSON bodies.
    Either(SchemaOf, SchemaOf),
}

impl Doc {
    pub(crate) const fn new(summary: &'static str) -> Self {
        Self {
            summary,
            body: None,
            query: None,
            status: 200,
            answer: Answer::Object,
            errors: &[],
            also: None,
            cursor: None,
        }
    }
    pub(crate) const fn also(mut self, status: u16, answer: Answer) -> Self {
        self.also = Some((status, answer));
        self
    }
    pub(crate) const fn cursor(mut self, pattern: &'static str) -> Self {
        self.cursor = Some(pattern);
        self
    }
    pub(crate) const fn body(mut self, body: SchemaOf) -> Self {
        self.body = Some(body);
        self
    }
    pub(crate) const fn query(
        mut self,
        query: fn() -> Vec<utoipa::openapi::path::Parameter>,
    ) -> Self {
        self.query = Some(query);
        self
    }
    pub(crate) const fn answers(mut self, status: u16, answer: Answer) -> Self {
        self.status = status;
        self.answer = answer;
        self
    }
    pub(crate) const fn errors(mut self, errors: &'static [&'static str]) -> Self {
        self.errors = errors;
        self
    }
}

/// The query parameters of `T`.
pub(crate) fn params<T: utoipa::IntoParams>() -> Vec<utoipa::openapi::path::Parameter> {
    T::into_params(|| Some(ParameterIn::Query))
}

fn method(method: &axum::http::Method) -> HttpMethod {
    match *method {
        axum::http::Method::GET => HttpMethod::Get,
        axum::http::Method::POST => HttpMethod::Post,
        axum::http::Method::PATCH => HttpMethod::Patch,
        axum::http::Method::DELETE => HttpMethod::Delete,
        axum::http::Method::PUT => HttpMethod::Put,
        ref other => panic!("no OpenAPI method for {other}"),
    }
}

/// The problem codes a route can answer: what its access, path, body and query
/// imply, its own, and those every route can answer.
fn codes(route: &crate::routes::Route, doc: &Doc) -> Vec<&'static str> {
    let mut codes = Vec::new();
    match route.access {
        Access::Public | Access::Portal => {}
        Access::Admin => codes.extend(["unauthorized", "admin_only", "rate_limited"]),
        Access::App(capability) => codes.extend([
            "unauthorized",
            crate::error::ApiError::MissingCapability(capability).code(),
            "rate_limited",
        ]),
    }
    if route.path.contains('{') {
        codes.push("not_found");
    }
    if doc.body.is_some() {
        codes.extend(["malformed_json", "validation_failed", "payload_too_large"]);
    }
    if doc.query.is_some() {
        codes.push("invalid_query");
    }
    codes.extend(doc.errors);
    if route.access != Access::Public {
        // Every route of the API proper reads or writes the database.
        codes.push("database_unavailable");
    }
    codes.extend(["method_not_allowed", "internal"]);
    codes
}

fn problem_schema() -> RefOr<Schema> {
    ObjectBuilder::new()
        .description(Some(
            "RFC 9457 problem details; `code` is stable, `type` is `/problems/{code}` on this server",
        ))
        .property("type", string())
        .property("title", string())
        .property("status", ObjectBuilder::new().schema_type(Type::Integer))
        .property("code", string())
        .property("detail", string())
        .required("type")
        .required("status")
        .required("code")
        .required("detail")
        .into()
}

fn list_of(item: RefOr<Schema>) -> RefOr<Schema> {
    ObjectBuilder::new()
        .property("data", ArrayBuilder::new().items(item))
        .property(
            "next_cursor",
            ObjectBuilder::new()
                .schema_type(utoipa::openapi::schema::SchemaType::from_iter([
                    Type::String,
                    Type::Null,
                ]))
                .description(Some("pass as `before` for the next page; null on the last")),
        )
        .required("data")
        .required("next_cursor")
        .into()
}

/// The whole document.
/// A route's path as OpenAPI spells it: a catch-all `{*file}` is `{file}`.
fn openapi_path(path: &str) -> String {
    path.replace("{*", "{")
}

/// A successful answer's description and body.
fn answer_of(answer: Answer, schemas: &mut Schemas) -> ResponseBuilder {
    match answer {
        Answer::Empty => ResponseBuilder::new().description("done"),
        Answer::Json(of) => ResponseBuilder::new().description("the answer").content(
            "application/json",
            ContentBuilder::new().schema(Some(of(schemas))).build(),
        ),
        Answer::Either(one, other) => ResponseBuilder::new().description("the answer").content(
            "application/json",
            ContentBuilder::new()
                .schema(Some(
                    utoipa::openapi::schema::OneOfBuilder::new()
                        .item(one(schemas))
                        .item(other(schemas)),
                ))
                .build(),
        ),
        Answer::List(of) => ResponseBuilder::new()
            .description("a page, newest first (docs/api.md#listings)")
            .content(
                "application/json",
                ContentBuilder::new()
                    .schema(Some(list_of(of(schemas))))
                    .build(),
            ),
        Answer::Object => ResponseBuilder::new()
            .description("JSON, as docs/api.md describes for this route")
            .content(
                "application/json",
                ContentBuilder::new()
                    .schema(Some(ObjectBuilder::new().schema_type(Type::Object)))
                    .build(),
            ),
        Answer::Text => ResponseBuilder::new().description("text").content(
            "text/plain",
            ContentBuilder::new().schema(Some(string())).build(),
        ),
        Answer::Html => ResponseBuilder::new().description("a page").content(
            "text/html",
            ContentBuilder::new().schema(Some(string())).build(),
        ),
    }
}

/// The schema of a query parameter that the API reads more strictly than its
/// Rust type says (the same names mean the same on every listing; a
/// polling fetch's `limit`, 1 to 100 numbers, is its type's own).
fn query_schema(name: &str, doc: &Doc, route: &crate::routes::Route) -> Option<RefOr<Schema>> {
    let schema = match name {
        "limit" if doc.cursor.is_some() => ObjectBuilder::new()
            .schema_type(Type::Integer)
            .minimum(Some(1))
            .maximum(Some(250))
            .description(Some("rows per page, 1 to 250 (default 50)")),
        "before" => string()
            .pattern(Some(doc.cursor.unwrap_or_else(|| {
                panic!(
                    "{} {}: a listing must declare its cursor's pattern",
                    route.method, route.path
                )
            })))
            .description(Some("the `next_cursor` of the previous page")),
        "endpoint_id" => string().pattern(Some(id_pattern!("ep_"))),
        "event_id" => string().pattern(Some(id_pattern!("msg_"))),
        "since" | "until" => string()
            .pattern(Some(TIME_PATTERN))
            .description(Some("an RFC 3339 UTC time such as 2026-12-01T09:30:00Z")),
        "status" => string()
            .pattern(Some("^([1-5][xX][xX]|[1-5][0-9][0-9])$"))
            .description(Some("an HTTP status (503) or a class (5xx)")),
        "event_type" | "ordering_key" => string()
            .pattern(Some(NAME_PATTERN))
            .min_length(Some(1))
            .max_length(Some(256)),
        _ => return None,
    };
    Some(schema.into())
}

/// Where a path parameter's value comes from: the operation that makes it,
/// and where in that operation's answer the value is (OpenAPI `links`, so a
/// stateful client such as schemathesis can reach every operation behind an id).
const SOURCES: &[(&str, &str, &str, &str)] = &[
    ("app", "POST", "/v1/apps", "$response.body#/id"),
    (
        "endpoint",
        "POST",
        "/v1/apps/{app}/endpoints",
        "$response.body#/id",
    ),
    (
        "event",
        "POST",
        "/v1/apps/{app}/events",
        "$response.body#/id",
    ),
    (
        "delivery",
        "POST",
        "/v1/apps/{app}/events",
        "$response.body#/deliveries/0/id",
    ),
    (
        "attempt",
        "GET",
        "/v1/apps/{app}/deliveries/{delivery}/attempts",
        "$response.body#/data/0/id",
    ),
    (
        "replay",
        "POST",
        "/v1/apps/{app}/replays",
        "$response.body#/id",
    ),
    (
        "channel",
        "POST",
        "/v1/apps/{app}/notifications",
        "$response.body#/id",
    ),
    ("key", "POST", "/v1/keys", "$response.body#/id"),
    ("name", "POST", "/v1/event-types", "$response.body#/name"),
];

/// Path parameters no operation makes: a problem code, the portal's files.
#[cfg(test)]
const UNLINKED: &[&str] = &["code", "hash", "file"];

fn path_params(path: &str) -> Vec<&str> {
    path.split('/')
        .filter_map(|segment| segment.strip_prefix('{')?.strip_suffix('}'))
        .map(|name| name.trim_start_matches('*'))
        .collect()
}

fn operation_id(method: &axum::http::Method, path: &str) -> String {
    format!(
        "{}_{}",
        method.as_str().to_lowercase(),
        openapi_path(path)
            .trim_start_matches('/')
            .replace(['/', '-'], "_")
            .replace(['{', '}'], "")
    )
}

/// The links from `route`'s answer: to every operation that needs the id it
/// makes (and otherwise only ids `route` itself was called with).
fn links(route: &crate::routes::Route) -> Vec<(String, utoipa::openapi::link::Link)> {
    let mut links = Vec::new();
    for (param, _, _, expression) in SOURCES
        .iter()
        .filter(|(_, method, path, _)| *method == route.method.as_str() && *path == route.path)
    {
        let own = path_params(route.path);
        for target in crate::routes::list() {
            let needs = path_params(target.path);
            if !needs.contains(param) || !needs.iter().all(|p| p == param || own.contains(p)) {
                continue;
            }
            let mut link = utoipa::openapi::link::LinkBuilder::new()
                .operation_id(operation_id(&target.method, target.path));
            for need in needs {
                link = if need == *param {
                    link.parameter(need, *expression)
                } else {
                    link.parameter(need, format!("$request.path.{need}"))
                };
            }
            links.push((operation_id(&target.method, target.path), link.build()));
        }
    }
    links
}

/// utoipa 5.5 writes a Link Object's `operationId` as `operation_id`; the
/// specification (and every client of it) reads `operationId`.
fn spell_links(document: &mut serde_json::Value) {
    let Some(paths) = document["paths"].as_object_mut() else {
        return;
    };
    for operation in paths.values_mut().filter_map(|p| p.as_object_mut()) {
        for operation in operation.values_mut() {
            let Some(answers) = operation["responses"].as_object_mut() else {
                continue;
            };
            for answer in answers.values_mut() {
                let Some(links) = answer.get_mut("links").and_then(|l| l.as_object_mut()) else {
                    continue;
                };
                for link in links.values_mut().filter_map(|l| l.as_object_mut()) {
                    if let Some(id) = link.remove("operation_id") {
                        link.insert("operationId".into(), id);
                    }
                }
            }
        }
    }
}

pub fn document() -> OpenApi {
    let mut schemas: Schemas = Vec::new();
    let mut paths = Paths::new();
    for (route, doc) in crate::routes::documented() {
        // A catch-all segment (`{*file}`) is one path parameter to OpenAPI.
        let path = openapi_path(route.path);
        let mut operation = OperationBuilder::new()
            .summary(Some(doc.summary))
            .operation_id(Some(operation_id(&route.method, route.path)))
            .tag(
                route
                    .path
                    .split('/')
                    .nth(if route.path.starts_with("/v1/apps/{app}/") {
                        4
                    } else {
                        2
                    })
                    .unwrap_or("system"),
            );
        let mut parameters: Vec<_> = path
            .split('/')
            .filter_map(|segment| segment.strip_prefix('{')?.strip_suffix('}'))
            .map(|name| {
                ParameterBuilder::new()
                    .name(name)
                    .parameter_in(ParameterIn::Path)
                    .required(Required::True)
                    .schema(Some(ObjectBuilder::new().schema_type(Type::String)))
                    .description(Some(match name {
                        "app" => "the app's id (app_…) or its uid",
                        "name" => "the event type's name",
                        "code" => "a problem code",
                        _ => "an id",
                    }))
                    .build()
            })
            .collect();
        if let Some(query) = doc.query {
            parameters.extend(query().into_iter().map(|mut parameter| {
                if let Some(schema) = query_schema(&parameter.name, &doc, &route) {
                    parameter.schema = Some(schema);
                }
                parameter
            }));
        }
        if !parameters.is_empty() {
            operation = operation.parameters(Some(parameters));
        }
        if let Some(body) = doc.body {
            let body = body(&mut schemas);
            operation = operation.request_body(Some(
                RequestBodyBuilder::new()
                    .content(
                        "application/json",
                        ContentBuilder::new().schema(Some(body)).build(),
                    )
                    .required(Some(Required::True))
                    .build(),
            ));
        }
        let operation_links = links(&route);
        let mut answer = answer_of(doc.answer, &mut schemas);
        for (name, link) in operation_links {
            answer = answer.link(name, link);
        }
        operation = operation.response(doc.status.to_string(), answer.build());
        if let Some((status, also)) = doc.also {
            operation =
                operation.response(status.to_string(), answer_of(also, &mut schemas).build());
        }
        let mut by_status: BTreeMap<u16, Vec<&'static str>> = BTreeMap::new();
        for code in codes(&route, &doc) {
            let kind = CATALOG.iter().find(|k| k.code == code).unwrap_or_else(|| {
                panic!(
                    "{} {}: code {code} is not in the catalog",
                    route.method, route.path
                )
            });
            by_status.entry(kind.status).or_default().push(code);
        }
        for (status, codes) in by_status {
            let description = codes
                .iter()
                .map(|code| {
                    let when = CATALOG
                        .iter()
                        .find(|k| k.code == *code)
                        .map_or("", |k| k.when);
                    format!("`{code}`: {when}")
                })
                .collect::<Vec<_>>()
                .join("; ");
            // A page for a browser answers its errors as pages too.
            let content = if matches!(doc.answer, Answer::Html) {
                (
                    "text/html",
                    ContentBuilder::new().schema(Some(string())).build(),
                )
            } else {
                (
                    "application/problem+json",
                    ContentBuilder::new()
                        .schema(Some(Ref::from_schema_name("Problem")))
                        .build(),
                )
            };
            operation = operation.response(
                status.to_string(),
                ResponseBuilder::new()
                    .description(description)
                    .content(content.0, content.1)
                    .build(),
            );
        }
        if route.access.needs_key() {
            operation =
                operation.security(SecurityRequirement::new("bearer", Vec::<String>::new()));
        }
        paths.add_path_operation(&path, vec![method(&route.method)], operation.build());
    }
    schemas.sort_by(|a, b| a.0.cmp(&b.0));
    schemas.dedup_by(|a, b| a.0 == b.0);
    let components = ComponentsBuilder::new()
        .schemas_from_iter(schemas)
        .schema("Problem", problem_schema())
        .security_scheme(
            "bearer",
            SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build()),
        )
        .build();
    OpenApiBuilder::new()
        .info(
            InfoBuilder::new()
                .title("Hookline")
                .version(env!("CARGO_PKG_VERSION"))
                .description(Some(
                    "Outbound webhooks: publish events, deliver them signed (Standard Webhooks), \
                     retry, dead-letter and replay. Generated from the route table; see docs/api.md.",
                ))
                .build(),
        )
        .paths(paths)
        .components(Some(components))
        .build()
}

/// The document as served and committed: pretty JSON with a final newline.
pub fn document_json() -> String {
    let mut document = serde_json::to_value(document()).expect("the document serializes");
    spell_links(&mut document);
    let mut text = serde_json::to_string_pretty(&document).expect("the document serializes");
    text.push('\n');
    text
}

#[cfg(test)]
mod tests {
    /// Every operation behind an id is reached by a link from the operation
    /// that makes the id, so a stateful client (schemathesis) calls it with a
    /// real one: a new route with a new kind of id must say where it comes from.
    #[test]
    fn every_operation_behind_an_id_is_linked_to() {
        let document: serde_json::Value = serde_json::from_str(&super::document_json()).unwrap();
        let mut linked = std::collections::BTreeSet::new();
        for operations in document["paths"].as_object().unwrap().values() {
            for operation in operations.as_object().unwrap().values() {
                for answer in operation["responses"].as_object().unwrap().values() {
                    if let Some(links) = answer["links"].as_object() {
                        for link in links.values() {
                            linked.insert(link["operationId"].as_str().unwrap().to_owned());
                        }
                    }
                }
            }
        }
        for route in crate::routes::list() {
            let params = super::path_params(route.path);
            if params.is_empty() || params.iter().any(|p| super::UNLINKED.contains(p)) {
                continue;
            }
            let id = super::operation_id(&route.method, route.path);
            assert!(linked.contains(&id), "no link leads to {id}");
        }
        assert!(linked.len() > 30, "{linked:?}");
    }

    /// Every `$ref` names a schema the document holds.
    #[test]
    fn every_reference_resolves() {
        let text = super::document_json();
        let document: serde_json::Value = serde_json::from_str(&text).unwrap();
        let schemas = document["components"]["schemas"].as_object().unwrap();
        for part in text.split("\"$ref\": \"#/components/schemas/").skip(1) {
            let name = part.split('"').next().unwrap();
            assert!(
                schemas.contains_key(name),
                "{name} is referenced but not defined"
            );
        }
    }

    /// `docs/openapi.json` is the generated document; regenerate it with
    /// `HOOKLINE_WRITE_OPENAPI=1 cargo test -p hookline-api openapi`.
    #[test]
    fn the_committed_openapi_document_is_the_generated_one() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/openapi.json");
        let generated = super::document_json();
        if std::env::var_os("HOOKLINE_WRITE_OPENAPI").is_some() {
            std::fs::write(path, &generated).unwrap();
        }
        let committed = std::fs::read_to_string(path).unwrap_or_default();
        assert!(
            committed == generated,
            "docs/openapi.json differs from the code's document: run \
             HOOKLINE_WRITE_OPENAPI=1 cargo test -p hookline-api openapi"
        );
    }

    #[test]
    fn every_route_is_in_the_document_with_its_problems() {
        let document: serde_json::Value = serde_json::from_str(&super::document_json()).unwrap();
        for route in crate::routes::list() {
            let operation = &document["paths"][super::openapi_path(route.path).as_str()]
                [route.method.as_str().to_lowercase()];
            assert!(
                operation.is_object(),
                "{} {} is missing",
                route.method,
                route.path
            );
            assert!(
                operation["responses"]["500"].is_object(),
                "{} {}",
                route.method,
                route.path
            );
            if route.access.needs_key() {
                assert!(
                    operation["responses"]["401"].is_object(),
                    "{} {}",
                    route.method,
                    route.path
                );
                assert!(
                    operation["responses"]["403"].is_object(),
                    "{} {}",
                    route.method,
                    route.path
                );
            }
        }
    }
}

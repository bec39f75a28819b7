//! Hookline's end-to-end tests: one test binary, real SQLite files, a real
//! PostgreSQL, real HTTP to a real receiver on 127.0.0.1:0.
//!
//! Every test that touches storage runs on both engines (`both_engines!`).

mod browser;
mod helpers;
mod prerequisites;
mod smtp;

mod access;
mod api;
mod aws;
mod batching;
mod brokers;
mod catalog;
mod client;
mod clock;
mod crash;
mod dashboard;
mod delivery;
mod egress;
mod endpoints;
mod faults;
mod filters;
mod freeze;
mod history;
mod hostile;
mod limits;
mod notifications;
mod operational;
mod ops;
mod outage;
mod outbound_auth;
mod plans;
mod policy;
mod policy_contract;
mod polling;
mod portal;
mod portal_access;
mod portal_languages;
mod redis;
mod sealing;
mod sequences;
mod store_contract;
mod transforms;
mod upgrade;

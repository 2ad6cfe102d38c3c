//! Faults of a series: the catalogue (what each protocol can express, and where it meets the
//! executor), the plan (which faults the seed enabled, every firing decision), schedules
//! (firings as data, for replay and shrinking).

pub mod catalogue;
pub mod plan;
pub mod schedule;

pub use catalogue::FaultKind;
pub use plan::{FaultPlan, FaultProfile, SharedPlan};
pub use schedule::{Firing, PlanMode, Schedule, ScheduleSize};

pub mod audit;
pub mod bench;
pub mod catalog;
pub mod collect;
pub mod generate;
pub mod models;
pub mod rehearse;
pub mod report;

pub mod audit;
pub mod bench;
pub mod catalog;
pub mod collect;
pub mod models;
pub mod rehearse;

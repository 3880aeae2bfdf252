pub mod audit;
pub mod catalog;
pub mod collect;

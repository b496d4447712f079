//! Audit shipping and the grant store as page services, and the page's handles on them.

use std::cell::RefCell;
use std::rc::Rc;
use std::time::Duration;

use leptos::prelude::*;

use super::{Countersign, PageService};
use crate::audit_ship::{Shipping, ShippingStatus};
use crate::grant_store::GrantStore;

impl PageService for Shipping {
    /// Sends the next batch if shipping is on, one waits and none is in flight.
    fn after_step(self: Rc<Self>, _cs: &Countersign) {
        self.ship();
    }

    /// Hands what the gateway has not acknowledged on, with the records of the calls
    /// the closing page settled.
    fn left(self: Rc<Self>, _cs: &Countersign) {
        self.flush_with_beacon();
    }
}

/// The grant store as a page service.
struct Grants(RefCell<GrantStore>);

impl PageService for Grants {
    /// Restores what can be restored, saves what changed, and shows restored grants.
    fn after_step(self: Rc<Self>, cs: &Countersign) {
        if crate::grant_store::sync(&mut self.0.borrow_mut(), &cs.0.executor) {
            cs.0.dock.grants.set(cs.0.executor.grants());
        }
    }
}

impl Countersign {
    /// Starts sending every audit record (past and future) to `endpoint` (the gateway's
    /// `/v1/audit`), in order, retried with backoff, and handed to `sendBeacon` when the
    /// page goes away. [`crate::Assistant::for_page`] does it when a gateway is there.
    pub fn ship_audit(&self, endpoint: impl Into<String>) {
        if let Some(shipping) = self.service::<Shipping>() {
            shipping.start(endpoint.into());
        }
    }

    /// How shipping is going, if it was started.
    pub fn shipping_status(&self) -> Option<ShippingStatus> {
        self.service::<Shipping>()?.status()
    }

    /// Whether the audit records the gateway has not acknowledged fill half the page's
    /// trail or more (see [`Shipping::backlogged`]).
    pub(crate) fn audit_backlogged(&self) -> bool {
        self.service::<Shipping>()
            .is_some_and(|shipping| shipping.backlogged())
    }

    /// Keeps "always allow" grants for `ttl` across page loads, in `localStorage` under
    /// `key` and the session's role. A saved grant is restored only when the same
    /// declaration registers again, for the same role, and only where a person could
    /// grant it now (`Ask`, not asked twice); its rule is derived again from the saved
    /// arguments. Expired and unreadable entries are dropped.
    pub fn persist_grants(&self, key: impl Into<String>, ttl: Duration) {
        let key = format!("{}:{}", key.into(), self.0.role);
        let store = GrantStore::open(key, ttl);
        match self.service::<Grants>() {
            // In place of the store the page kept before.
            Some(grants) => *grants.0.borrow_mut() = store,
            None => self.add_service(Rc::new(Grants(RefCell::new(store)))),
        }
        self.pump();
    }
}

//! Init's ROM service (`rt::session::rom`; docs/architecture.md,
//! "Sessions and routing", 6): a `Rom` session routed to `parent` is
//! answered by init itself, page by page, at once.

use formats::bootimage::BootImage;
use rt::abi::caddr::own;
use rt::abi::{ObjectType, Rights};
use rt::interfaces::session;
use rt::println;
use rt::resources::Resources;
use rt::session::rom;
use rt::spawn;
use rt::syscall;
use ucore::load::PAGE_SIZE;

use crate::sessions::reply;
use crate::Kid;

/// Init's ROM service (`rt::session::rom`): boot-image modules, each page
/// copied into a fresh frame from init's own memory and handed over
/// read-only.
pub struct RomService<'r, 'a> {
    pub image: &'r BootImage<'a>,
    pub res: &'r mut Resources,
    /// Init's address space, for the scratch page.
    pub vspace: u32,
    pub transit: u32,
}

impl RomService<'_, '_> {
    /// Answers a request `label`, `words` on the ROM session of child
    /// `badge` (without `session::PARENT_SESSION`).
    pub fn serve(mut self, kids: &[Kid<'_>], badge: u64, label: u64, words: &[u64; 4]) {
        let index = badge & !session::PARENT_SESSION;
        let Some(client) = kids.iter().find(|k| k.id as u64 + 1 == index) else {
            return reply(rom::NOT_FOUND, [0; 4], None);
        };
        let (component, client) = (&client.component, client.component.name);
        let (bytes, len) = session::unpack(words);
        let module = core::str::from_utf8(&bytes[..len]).unwrap_or("?");
        // `config` is the client's own config tree, not the scenario's ROM
        // (which holds every component's config).
        let data = match self.image.find(module) {
            _ if module == "config" => component.config_tree(),
            Some(entry) => entry.data,
            None => {
                println!("init: {client} asks for ROM {module:?}: no such module; refused");
                return reply(rom::NOT_FOUND, [0; 4], None);
            }
        };
        let page = PAGE_SIZE as usize;
        let pages = data.len().div_ceil(page) as u64;
        match label & ((1 << rom::INDEX_SHIFT) - 1) {
            rom::INFO => {
                println!(
                    "init: {client} reads ROM {module:?} ({} bytes, {pages} pages)",
                    data.len()
                );
                reply(rom::OK, [data.len() as u64, pages, 0, 0], None)
            }
            rom::PAGE => {
                let i = label >> rom::INDEX_SHIFT;
                if i >= pages {
                    return reply(rom::OUT_OF_RANGE, [0; 4], None);
                }
                let start = i as usize * page;
                let chunk = &data[start..data.len().min(start + page)];
                match self.page(chunk) {
                    Ok(()) => reply(rom::OK, [0; 4], Some(self.transit)),
                    Err(why) => {
                        println!("init: ROM {module:?} page {i} for {client}: {why}");
                        reply(rom::NO_MEMORY, [0; 4], None)
                    }
                }
            }
            _ => reply(rom::UNKNOWN, [label, 0, 0, 0], None),
        }
    }

    /// A fresh frame of init's (kept: see `rt::session::rom`, "Cost")
    /// holding `chunk`, minted read-only into the transit slot.
    fn page(&mut self, chunk: &[u8]) -> Result<(), &'static str> {
        let frame = self
            .res
            .make(ObjectType::Frame4K, 0)
            .map_err(|_| "no memory or slot left for a frame")?;
        spawn::fill_frame(self.vspace, frame, 0, chunk, 0).map_err(|_| "copying failed")?;
        syscall::cap_mint(own(frame), own(self.transit), Rights::READ, 0)
            .map_err(|_| "CapMint (read-only) failed")
    }
}
